//! A build without the cargo feature `mcp`: `cli` refuses a configuration that enables a
//! server, so a run never has one to start or stop.

use super::RunSpec;
use crate::agent::RunControl;
use crate::events::EventSink;

#[derive(Default)]
pub(super) struct Running;

pub(super) async fn start(
    spec: &mut RunSpec,
    _: &EventSink,
    _: &RunControl,
) -> (Running, Option<String>) {
    debug_assert!(spec.mcp.is_empty(), "cli refuses MCP servers without MCP");
    (Running, None)
}

pub(super) async fn stop(_: Running, _: bool) {}
