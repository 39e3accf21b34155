//! The output limit (`max_tokens`, which the Messages API requires) sent when the config
//! sets none: each model family's documented maximum, so a long `write_file` call is not
//! cut at an arbitrary 4096 tokens.

/// For a model id nothing below matches: newer families allow at least this much, and a
/// server that allows less says so in a 400 naming `max_tokens`.
pub const UNKNOWN_FAMILY_MAX_TOKENS: u64 = 32_000;

/// Family markers (as they appear in Anthropic ids, Bedrock/Vertex ids and gateway names
/// such as `anthropic/claude-3.7-sonnet`) and the family's maximum output, most specific
/// first.
const FAMILIES: &[(&[&str], u64)] = &[
    (&["opus-4-6", "opus-4.6"], 128_000),
    (&["opus-4-5", "opus-4.5"], 64_000),
    (&["opus-4", "claude-4-opus"], 32_000),
    (&["sonnet-4", "claude-4-sonnet", "haiku-4"], 64_000),
    (&["claude-3-7", "claude-3.7"], 64_000),
    (&["claude-3-5", "claude-3.5"], 8_192),
    (&["claude-3-", "claude-3."], 4_096),
];

/// The `max_tokens` a request of `model` carries when the config sets none.
pub fn default_max_tokens(model: &str) -> u64 {
    let id = model.to_ascii_lowercase();
    FAMILIES
        .iter()
        .find(|(markers, _)| markers.iter().any(|m| id.contains(m)))
        .map_or(UNKNOWN_FAMILY_MAX_TOKENS, |(_, max)| *max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_gets_its_documented_output_limit() {
        for (model, max) in [
            ("claude-opus-4-6", 128_000),
            ("claude-opus-4-5-20251101", 64_000),
            ("claude-opus-4-1-20250805", 32_000),
            ("claude-opus-4-20250514", 32_000),
            ("claude-opus-4-0", 32_000),
            ("claude-sonnet-4-20250514", 64_000),
            ("claude-sonnet-4-5", 64_000),
            ("claude-sonnet-4-6", 64_000),
            ("claude-haiku-4-5-20251001", 64_000),
            ("claude-3-7-sonnet-latest", 64_000),
            ("anthropic/claude-3.7-sonnet", 64_000),
            ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 64_000),
            ("claude-3-5-sonnet-20241022", 8_192),
            ("claude-3-5-haiku-latest", 8_192),
            ("claude-3-opus-20240229", 4_096),
            ("claude-3-haiku-20240307", 4_096),
            ("Claude-Sonnet-4-5", 64_000),
        ] {
            assert_eq!(default_max_tokens(model), max, "{model}");
        }
    }

    #[test]
    fn an_unknown_model_gets_a_large_default() {
        for model in ["claude-x", "MiniMax-M2", "glm-4.6", ""] {
            assert_eq!(
                default_max_tokens(model),
                UNKNOWN_FAMILY_MAX_TOKENS,
                "{model}"
            );
        }
        const { assert!(UNKNOWN_FAMILY_MAX_TOKENS > 4096) };
    }
}
