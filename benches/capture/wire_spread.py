"""Wire spread of a burst's held final bytes, from a loopback pcap, beside report.json.

Usage: wire_spread.py CAPTURE.pcap REPORT.json COUNT. A create's held byte is a
one-byte TCP segment carrying `}`; its first transmission counts (by source port and
sequence number: loss probes resend some). Segments are grouped by destination port
(one service per mode-run); groups with fewer than COUNT/2 bytes are ignored. Groups
are matched to the report's runs in time order.
"""

import json
import struct
import sys


def segments(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
        link = struct.unpack(endian + "I", head[20:24])[0]
        skip = {1: 14, 113: 16, 276: 20, 0: 4}[link]
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, incl, _ = struct.unpack(endian + "IIII", rec)
            data = f.read(incl)
            ts = sec + frac / (1e9 if nano else 1e6)
            ip = data[skip:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            ihl = (ip[0] & 15) * 4
            total = struct.unpack(">H", ip[2:4])[0]
            tcp = ip[ihl:]
            if len(tcp) < 20:
                continue
            sport, dport, seq = struct.unpack(">HHI", tcp[:8])
            off = (tcp[12] >> 4) * 4
            payload_len = total - ihl - off
            payload = tcp[off:off + payload_len]
            yield ts, sport, dport, seq, payload_len, payload


def main():
    pcap, report, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    first = {}
    for ts, sport, dport, seq, n, payload in segments(pcap):
        if n == 1 and payload == b"}":
            key = (dport, sport, seq)
            if key not in first:
                first[key] = ts
    groups = {}
    for (dport, _, _), ts in first.items():
        groups.setdefault(dport, []).append(ts)
    groups = sorted((min(v), port, v) for port, v in groups.items() if len(v) >= count // 2)
    runs = json.load(open(report))["runs"]
    for i, (_, port, stamps) in enumerate(groups):
        wire = (max(stamps) - min(stamps)) * 1e3
        r = runs[i] if i < len(runs) else {"label": "?", "send": {}}
        send = r.get("send", {})
        client = send.get("burst_spread_ms")
        server = send.get("server_arrival_spread_ms")
        fmt = lambda v: "none" if v is None else f"{v:.2f}"
        # A capture that dropped segments (tcpdump's buffer) understates the spread.
        whole = "yes" if len(stamps) == count else "no"
        print(f"mode {r['label']} port={port} bytes={len(stamps)} complete={whole} wire_ms={wire:.2f} "
              f"client_ms={fmt(client)} service_ms={fmt(server)} "
              f"wire_minus_client_ms={fmt(None if client is None else wire - client)} "
              f"creates={r.get('requests')} ok={r.get('ok')} failed={r.get('failed')}")


main()
