//! The CPU a node reports in ServiceInfo's `machine_info`.
//!
//! E2B's orchestrator detects it at start (`packages/orchestrator/pkg/service/machineinfo/`):
//! the architecture is Go's `runtime.GOARCH` (`amd64`, `arm64`), family, model and model
//! name come from gopsutil, which reads `/proc/cpuinfo`; on arm64, where that file has no
//! family or model, it reports family `arm64` and model `0`. E2B's API places a sandbox
//! only on nodes whose CPU is compatible with the one its template was built on
//! (`placement/cpu_compatibility.go`), so a virtual node reports what an orchestrator on
//! this host would report: a mock fleet on the machine that built the templates is
//! compatible with them, as a real fleet of the same hosts is.

use std::sync::OnceLock;

/// CPU facts of the host, in the form E2B's orchestrator reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCpu {
    /// Go's architecture name (`amd64`, `arm64`, ...).
    pub architecture: String,
    /// `/proc/cpuinfo`'s `cpu family`.
    pub family: String,
    /// `/proc/cpuinfo`'s `model`.
    pub model: String,
    /// `/proc/cpuinfo`'s `model name`.
    pub model_name: String,
}

/// The host's CPU, detected once per process.
pub fn host_cpu() -> &'static HostCpu {
    static CPU: OnceLock<HostCpu> = OnceLock::new();
    CPU.get_or_init(|| {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        from_cpuinfo(std::env::consts::ARCH, &cpuinfo)
    })
}

/// Go's name for a Rust target architecture.
fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// The first processor's facts in `cpuinfo`, with E2B's arm64 fallback.
fn from_cpuinfo(rust_arch: &str, cpuinfo: &str) -> HostCpu {
    let first = |key: &str| {
        cpuinfo
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let architecture = go_arch(rust_arch).to_string();
    let arm = architecture == "arm64";
    HostCpu {
        family: first("cpu family").unwrap_or_else(|| if arm { "arm64" } else { "unknown" }.into()),
        model: first("model").unwrap_or_else(|| if arm { "0" } else { "unknown" }.into()),
        model_name: first("model name").unwrap_or_default(),
        architecture,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_cpuinfo_reads_as_gopsutil_reports_it() {
        let info = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R)\n";
        let cpu = from_cpuinfo("x86_64", info);
        assert_eq!(cpu.architecture, "amd64");
        assert_eq!((cpu.family.as_str(), cpu.model.as_str()), ("6", "85"));
        assert_eq!(cpu.model_name, "Intel(R) Xeon(R)");
    }

    #[test]
    fn arm_without_family_falls_back_as_e2b_does() {
        let cpu = from_cpuinfo("aarch64", "processor\t: 0\nBogoMIPS\t: 50.00\n");
        assert_eq!(cpu.architecture, "arm64");
        assert_eq!((cpu.family.as_str(), cpu.model.as_str()), ("arm64", "0"));
    }
}
