//! The closed sets of names the events carry (`tool_result.status`, `run_completed.status`,
//! `context_compacted.reason`, `warning.code`), as enums: the compiler checks every use, and
//! each set is listed once (`ALL`), in the order `deerflow schema` names it.

use serde::Serialize;

/// Defines a unit enum serialized as its snake_case name, with `as_str` and `ALL`.
macro_rules! names {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// Every name, in `ALL`'s order.
            pub fn names() -> Vec<&'static str> {
                Self::ALL.iter().map(|v| v.as_str()).collect()
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names! {
    /// `tool_result.status` and a sub-agent tool message's `status`. A tool failure is a
    /// value returned to the model, never an error that ends the run.
    ToolStatus {
        Ok => "ok",
        Error => "error",
    }
}

names! {
    /// `run_completed.status`.
    RunStatus {
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
        TimedOut => "timed_out",
        NeedsClarification => "needs_clarification",
        MaxTurns => "max_turns",
        BudgetExceeded => "budget_exceeded",
    }
}

names! {
    /// `context_compacted.reason`, and why a context policy acts before a model call.
    CompactionReason {
        /// Before a model call: act if a trigger fires.
        Trigger => "trigger",
        /// The provider said the last request's context was too long: shrink now.
        Overflow => "overflow",
    }
}

names! {
    /// `warning.code` (contract §3's list).
    WarningCode {
        LoopDetected => "loop_detected",
        TaskLimit => "task_limit",
        UnknownSubagentType => "unknown_subagent_type",
        ModelRetry => "model_retry",
        ConfigIgnored => "config_ignored",
        Budget => "budget",
        OutputTruncated => "output_truncated",
        ContentFiltered => "content_filtered",
        McpServerFailed => "mcp_server_failed",
        McpToolRenamed => "mcp_tool_renamed",
        SchemaRetry => "schema_retry",
        CompactionFailed => "compaction_failed",
        SkillSkipped => "skill_skipped",
        SandboxUnused => "sandbox_unused",
        ToolUnavailable => "tool_unavailable",
        RateLimited => "rate_limited",
        Resumed => "resumed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_serializes_as_the_string_the_events_always_carried() {
        assert_eq!(
            serde_json::to_string(&RunStatus::NeedsClarification).unwrap(),
            "\"needs_clarification\""
        );
        assert_eq!(
            serde_json::to_string(&WarningCode::UnknownSubagentType).unwrap(),
            "\"unknown_subagent_type\""
        );
        assert_eq!(CompactionReason::names(), ["trigger", "overflow"]);
        assert_eq!(ToolStatus::names(), ["ok", "error"]);
    }
}
