//! Run reports: the model (`report.json`, versioned), its figures, and pure writers
//! into any `Write` (JSON, Markdown, terminal tables, HTML), plus the profile's checks
//! and the comparison of two reports.

mod checks;
mod compare;
mod compare_out;
mod distribution;
pub mod format;
mod html;
mod html_charts;
pub(crate) mod junit;
mod markdown;
mod model;
mod output;
mod over_time;
mod resumes;
mod spread;
mod staging;
mod stats;
mod step_summary;
mod svg;
mod svg_time;
mod svg_trend;
mod terminal;
mod trend;
pub(crate) mod untrusted;

pub use checks::{bound_text, evaluate};
pub use compare::{
    compare, compare_with_baseline, CompareError, CompareOptions, Comparison, Delta, RunComparison,
    DEFAULT_LATENCY_TOLERANCE, DEFAULT_TOLERANCE,
};
pub use compare_out::{write_comparison, write_comparison_junit, write_comparison_markdown};
pub use distribution::{compact, distribution, MAX_NODE_BARS};
pub use html::write_html;
pub use junit::write_junit;
pub use markdown::write_markdown;
pub use model::*;
pub use output::{
    check_report_parent, compact_utc, now_rfc3339, read_json, write_json, write_report_dir,
    ReadReportError,
};
pub use over_time::{LatencyBin, LatencyOverTime, RetryStorm, SkewOverTime};
pub use resumes::{ResumeCall, ResumeFigures};
pub use spread::Spread;
pub use staging::{
    limited_count, write_staging, Baseline, CleanupReport, FinalRead, NotCleaned, StagingFacts,
    CANCELLED_KEY,
};
pub use stats::{LatencySummary, SkewStats};
pub use step_summary::{
    append_markdown_to_step_summary, append_step_summary, append_to_step_summary,
    step_summary_path, STEP_SUMMARY_ENV,
};
pub use svg_trend::TrendPoint;
pub use terminal::{write_terminal, write_verdict};
pub use trend::{
    read_reports, read_reports_skipping, trend, write_trend_html, write_trend_markdown,
    TrendSeries, DEFAULT_TREND_RUNS, MAX_TREND_INPUTS,
};

/// JSON Schema of `report.json`, shipped as `report.schema.json` (documented in
/// `reports/README.md`).
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Report)).unwrap_or(serde_json::Value::Null)
}
