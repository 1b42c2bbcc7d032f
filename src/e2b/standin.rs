//! Stand-in Go modules for dependencies the Go module proxy refuses, written by
//! stampede and used only when asked (`--stand-in loki`). Each is a module of the same
//! path with the few types E2B's API names; what they would do is not needed for
//! placement, and the build's output says a stand-in was used.

use std::path::{Path, PathBuf};

/// A module the build can replace with a stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StandIn {
    /// `github.com/grafana/loki/v3`: E2B's API uses Loki only to query sandbox and build
    /// logs; the proxy refuses some of the versions E2B pins (e.g. v3.6.11, 403).
    Loki,
}

impl StandIn {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            StandIn::Loki => "loki",
        }
    }

    /// The Go module path it replaces.
    pub fn module(self) -> &'static str {
        match self {
            StandIn::Loki => "github.com/grafana/loki/v3",
        }
    }

    /// Files of the stand-in module: (path, text).
    fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            StandIn::Loki => LOKI,
        }
    }

    /// Writes the stand-in module under `dir` and returns its folder.
    pub fn write(self, dir: &Path) -> std::io::Result<PathBuf> {
        let root = dir.join(format!("standin-{}", self.as_str()));
        for (rel, text) in self.files() {
            let p = root.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(p, text)?;
        }
        Ok(root)
    }
}

impl std::str::FromStr for StandIn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "loki" => Ok(StandIn::Loki),
            _ => Err(format!("unknown stand-in `{s}` (one of: loki)")),
        }
    }
}

impl std::fmt::Display for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const LOKI: &[(&str, &str)] = &[
    (
        "go.mod",
        r#"module github.com/grafana/loki/v3

go 1.21
"#,
    ),
    (
        "pkg/logproto/direction.go",
        r#"// Package logproto is stampede's stand-in for the one Loki type E2B's API names here:
// the direction of a log query. Log queries are not part of placement.
package logproto

// Direction orders a log query's results.
type Direction int32

const (
	// FORWARD returns the oldest entries first.
	FORWARD Direction = 0
	// BACKWARD returns the newest entries first.
	BACKWARD Direction = 1
)
"#,
    ),
    (
        "pkg/loghttp/query.go",
        r#"// Package loghttp is stampede's stand-in for the Loki query response types E2B's API
// reads. Nothing fills them: the stand-in client always fails.
package loghttp

import "time"

// ResultType names the kind of a query result.
type ResultType string

// ResultTypeStream is the kind of a log-stream result.
const ResultTypeStream ResultType = "streams"

// ResultValue is a query result of some kind.
type ResultValue interface{ Type() ResultType }

// Entry is one log line.
type Entry struct {
	Timestamp time.Time
	Line      string
}

// Stream is a labelled series of entries.
type Stream struct {
	Labels  map[string]string
	Entries []Entry
}

// Streams is a log-stream result.
type Streams []Stream

// Type says that Streams is a log-stream result.
func (Streams) Type() ResultType { return ResultTypeStream }

// QueryResponseData is a response's payload.
type QueryResponseData struct {
	ResultType ResultType
	Result     ResultValue
}

// QueryResponse is a query's answer.
type QueryResponse struct {
	Status string
	Data   QueryResponseData
}
"#,
    ),
    (
        "pkg/logcli/client/client.go",
        r#"// Package client is stampede's stand-in for Loki's query client: every query fails,
// because the stand-in has no Loki behind it (placement never queries logs).
package client

import (
	"errors"
	"time"

	"github.com/grafana/loki/v3/pkg/logproto"
	"github.com/grafana/loki/v3/pkg/loghttp"
)

// DefaultClient holds a Loki address and credentials; the stand-in ignores them.
type DefaultClient struct {
	Address  string
	Username string
	Password string
}

// ErrStandIn is what every query of the stand-in returns.
var ErrStandIn = errors.New("loki stand-in (stampede): log queries are not available")

// QueryRange always fails with ErrStandIn.
func (c *DefaultClient) QueryRange(query string, limit int, start, end time.Time, direction logproto.Direction, step, interval time.Duration, quiet bool) (*loghttp.QueryResponse, error) {
	return nil, ErrStandIn
}
"#,
    ),
];
