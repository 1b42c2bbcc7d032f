// Command nomad-check reads mock-node's Nomad-style discovery API with HashiCorp's own
// Go client (the package and version E2B's API uses), then dials every discovered node
// over gRPC as E2B's API would, and exits non-zero on the first broken promise:
//
//   - Services().Get(name) lists one registration per virtual node, each with a
//     routable Address:Port and a Nomad node id whose first 8 characters (E2B's
//     ShortID) are unique;
//   - Nodes().List with E2B's legacy filter returns the same node ids, so E2B's merge
//     (registrations first, then nodes, deduplicated by ShortID) dials nothing twice;
//   - every registration answers InfoService/ServiceInfo with the node name that the
//     node list pairs with its NodeID;
//   - the allocation query E2B uses for template managers answers an empty list;
//   - a non-existent service is an empty list and a bad filter is a 400, as in Nomad.
//
// Usage: nomad-check -nomad http://127.0.0.1:PORT -service NAME -expect N
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// shortIDLength is E2B's consts.NodeIDLength.
const shortIDLength = 8

// legacyFilter is the expression E2B's node-pool discovery sends.
var legacyFilter = fmt.Sprintf("Status == %q and NodePool == %q", "ready", "default")

// templateManagerFilter is the expression E2B's template-manager discovery sends.
const templateManagerFilter = `ClientStatus == "running" and ((TaskGroup == "template-manager" and JobID contains "template-manager") or (TaskGroup == "client-orchestrator" and JobID contains "orchestrator"))`

// rawCodec passes bytes through, so no generated stubs are needed: the request is
// google.protobuf.Empty (zero bytes) and the reply is decoded with protowire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, errors.New("rawCodec: want *[]byte")
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec: want *[]byte")
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// serviceInfoNodeID reads field 1 (node_id) of a ServiceInfoResponse.
func serviceInfoNodeID(msg []byte) (string, error) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		msg = msg[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return "", protowire.ParseError(m)
			}
			return string(v), nil
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return "", protowire.ParseError(m)
		}
		msg = msg[m:]
	}
	return "", nil
}

func serviceInfo(ctx context.Context, addr string) (string, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	req := []byte{}
	var reply []byte
	if err := conn.Invoke(ctx, "/InfoService/ServiceInfo", &req, &reply, grpc.ForceCodec(rawCodec{})); err != nil {
		return "", err
	}
	return serviceInfoNodeID(reply)
}

func short(id string) string {
	if len(id) > shortIDLength {
		return id[:shortIDLength]
	}
	return id
}

func run() error {
	nomadURL := flag.String("nomad", "", "mock-node's Nomad URL (the ready line's nomad=)")
	service := flag.String("service", "stampede-orchestrator", "service name the nodes register")
	expect := flag.Int("expect", 0, "number of virtual nodes")
	timeout := flag.Duration("timeout", 120*time.Second, "deadline of the whole check")
	workers := flag.Int("workers", 32, "concurrent ServiceInfo calls")
	flag.Parse()
	if *nomadURL == "" || *expect <= 0 {
		return errors.New("usage: nomad-check -nomad URL -expect N [-service NAME]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	client, err := nomadapi.NewClient(&nomadapi.Config{Address: *nomadURL})
	if err != nil {
		return fmt.Errorf("nomad client: %w", err)
	}
	opts := (&nomadapi.QueryOptions{}).WithContext(ctx)

	// E2B's primary discovery: the service registrations.
	regs, meta, err := client.Services().Get(*service, opts)
	if err != nil {
		return fmt.Errorf("Services().Get(%q): %w", *service, err)
	}
	if meta.LastIndex == 0 {
		return errors.New("Services().Get: X-Nomad-Index is 0")
	}
	if len(regs) != *expect {
		return fmt.Errorf("Services().Get: %d registrations, want %d", len(regs), *expect)
	}
	shortIDs := map[string]string{}
	addrs := map[string]string{}
	for _, r := range regs {
		if r.ServiceName != *service {
			return fmt.Errorf("registration %s: service %q", r.ID, r.ServiceName)
		}
		ip := net.ParseIP(r.Address)
		if ip == nil || ip.IsUnspecified() || r.Port <= 0 {
			return fmt.Errorf("registration %s: unroutable %q:%d", r.ID, r.Address, r.Port)
		}
		s := short(r.NodeID)
		if prev, dup := shortIDs[s]; dup {
			return fmt.Errorf("short id %s shared by %s and %s", s, prev, r.NodeID)
		}
		shortIDs[s] = r.NodeID
		addr := net.JoinHostPort(r.Address, strconv.Itoa(r.Port))
		if prev, dup := addrs[addr]; dup {
			return fmt.Errorf("address %s registered by %s and %s", addr, prev, r.NodeID)
		}
		addrs[addr] = r.NodeID
	}

	// E2B's legacy fallback: ready nodes of pool "default", dialled on port 5008.
	nodes, _, err := client.Nodes().List((&nomadapi.QueryOptions{Filter: legacyFilter}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("Nodes().List(%s): %w", legacyFilter, err)
	}
	names := map[string]string{}
	for _, n := range nodes {
		if n.Status != "ready" || n.NodePool != "default" {
			return fmt.Errorf("node %s: status %q pool %q passed the filter", n.ID, n.Status, n.NodePool)
		}
		if _, ok := shortIDs[short(n.ID)]; !ok {
			return fmt.Errorf("node %s (%s) has no registration: E2B would dial %s:5008", n.ID, n.Name, n.Address)
		}
		names[n.ID] = n.Name
	}
	// E2B's merge: registrations first, then nodes, unique by ShortID.
	merged := map[string]struct{}{}
	dialled := map[string]struct{}{}
	for _, r := range regs {
		merged[short(r.NodeID)] = struct{}{}
		dialled[net.JoinHostPort(r.Address, strconv.Itoa(r.Port))] = struct{}{}
	}
	for _, n := range nodes {
		if _, seen := merged[short(n.ID)]; seen {
			continue
		}
		a := net.JoinHostPort(n.Address, "5008")
		if _, twice := dialled[a]; twice {
			return fmt.Errorf("legacy node %s would be dialled at %s a second time", n.ID, a)
		}
		merged[short(n.ID)] = struct{}{}
		dialled[a] = struct{}{}
	}
	if len(merged) != *expect {
		return fmt.Errorf("merged discovery: %d nodes, want %d", len(merged), *expect)
	}

	// Template managers: E2B lists allocations with resources and its filter.
	allocs, _, err := client.Allocations().List((&nomadapi.QueryOptions{
		Params: map[string]string{"resources": "true"},
		Filter: templateManagerFilter,
	}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("Allocations().List: %w", err)
	}
	if len(allocs) != 0 {
		return fmt.Errorf("Allocations().List: %d allocations, want none", len(allocs))
	}

	// Nomad's answers to bad input, through the same client.
	none, _, err := client.Services().Get("no-such-service", opts)
	if err != nil || len(none) != 0 {
		return fmt.Errorf("unknown service: %d registrations, error %v; want [] and no error", len(none), err)
	}
	_, _, err = client.Nodes().List((&nomadapi.QueryOptions{Filter: `Status ==`}).WithContext(ctx))
	if err == nil || !strings.Contains(err.Error(), "400") {
		return fmt.Errorf("bad filter: error %v, want a 400", err)
	}

	// Every registration answers ServiceInfo with its paired node name.
	type result struct {
		reg *nomadapi.ServiceRegistration
		got string
		err error
	}
	jobs := make(chan *nomadapi.ServiceRegistration)
	results := make(chan result)
	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				callCtx, cancelCall := context.WithTimeout(ctx, 10*time.Second)
				got, err := serviceInfo(callCtx, net.JoinHostPort(r.Address, strconv.Itoa(r.Port)))
				cancelCall()
				results <- result{r, got, err}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, r := range regs {
			select {
			case jobs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	answered := 0
	var firstErr error
	for res := range results {
		want, paired := names[res.reg.NodeID]
		switch {
		case res.err != nil:
			firstErr = errors.Join(firstErr, fmt.Errorf("ServiceInfo %s:%d: %w", res.reg.Address, res.reg.Port, res.err))
		case !paired:
			firstErr = errors.Join(firstErr, fmt.Errorf("registration %s: node %s not in the node list", res.reg.ID, res.reg.NodeID))
		case res.got != want:
			firstErr = errors.Join(firstErr, fmt.Errorf("%s:%d reports node %q, its Nomad node %s is named %q", res.reg.Address, res.reg.Port, res.got, res.reg.NodeID, want))
		default:
			answered++
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if answered != *expect {
		return fmt.Errorf("ServiceInfo answered by %d of %d nodes (deadline %s)", answered, *expect, *timeout)
	}
	fmt.Printf("nomad-check ok: %d registrations, %d legacy nodes, %d unique short ids, %d ServiceInfo answers paired\n",
		len(regs), len(nodes), len(shortIDs), answered)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nomad-check:", err)
		os.Exit(1)
	}
}
