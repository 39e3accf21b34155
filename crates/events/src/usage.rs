//! Token usage: one record per model response, attributed to its caller and model, and
//! the run's totals and cost. Totals add up reported usage only.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Serialize;

use deerflow_model::Usage;

#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, JsonSchema, PartialEq, Eq)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

impl UsageTotals {
    pub fn add(&mut self, u: &Usage) {
        // Saturating: a provider reporting absurd numbers must not wrap the totals around.
        self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(u.total_tokens);
    }
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Price of cached input tokens; the input price when absent.
    pub cache_hit_per_mtok: Option<f64>,
    /// Price of input tokens written to the prompt cache; the input price when absent.
    pub cache_write_per_mtok: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct RunUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub lead: UsageTotals,
    pub subagents: UsageTotals,
    pub by_model: BTreeMap<String, UsageTotals>,
    /// Present as `null` unless every called model has a price.
    pub cost_usd: Option<f64>,
}

#[derive(Default)]
struct Inner {
    lead: UsageTotals,
    subagents: UsageTotals,
    by_model: BTreeMap<String, UsageTotals>,
    /// The parts of each model's input tokens read from and written to its prompt cache.
    cache_by_model: HashMap<String, CacheTokens>,
}

#[derive(Debug, Clone, Copy, Default)]
struct CacheTokens {
    read: u64,
    written: u64,
}

/// The run's usage ledger, shared by the lead and every sub-agent.
#[derive(Default)]
pub struct Ledger {
    inner: Mutex<Inner>,
    prices: HashMap<String, Price>,
}

impl Ledger {
    pub fn new(prices: HashMap<String, Price>) -> Self {
        Self {
            inner: Mutex::default(),
            prices,
        }
    }

    /// Records one response's usage; returns the run's total tokens afterwards.
    pub fn record(&self, is_lead: bool, model: &str, usage: Option<&Usage>) -> u64 {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = g.by_model.entry(model.to_string()).or_default();
        if let Some(u) = usage {
            bucket.add(u);
            if is_lead {
                g.lead.add(u);
            } else {
                g.subagents.add(u);
            }
            let cache = g.cache_by_model.entry(model.to_string()).or_default();
            cache.read = cache.read.saturating_add(u.cache_read_tokens.unwrap_or(0));
            cache.written = cache
                .written
                .saturating_add(u.cache_write_tokens.unwrap_or(0));
        }
        g.lead.total_tokens.saturating_add(g.subagents.total_tokens)
    }

    pub fn total_tokens(&self) -> u64 {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.lead.total_tokens.saturating_add(g.subagents.total_tokens)
    }

    pub fn snapshot(&self) -> RunUsage {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let cost_usd = self.cost(&g);
        RunUsage {
            input_tokens: g.lead.input_tokens.saturating_add(g.subagents.input_tokens),
            output_tokens: g
                .lead
                .output_tokens
                .saturating_add(g.subagents.output_tokens),
            total_tokens: g.lead.total_tokens.saturating_add(g.subagents.total_tokens),
            lead: g.lead,
            subagents: g.subagents,
            by_model: g.by_model.clone(),
            cost_usd,
        }
    }

    /// Null unless every called model has a price.
    fn cost(&self, g: &Inner) -> Option<f64> {
        if g.by_model.is_empty() {
            return None;
        }
        let mut total = 0.0;
        for (model, t) in &g.by_model {
            let p = self.prices.get(model)?;
            let cache = g.cache_by_model.get(model).copied().unwrap_or_default();
            // Both parts are inside `input_tokens`; clamped so absurd reports cannot make
            // the uncached rest negative.
            let read = cache.read.min(t.input_tokens);
            let written = cache.written.min(t.input_tokens - read);
            let fresh = t.input_tokens - read - written;
            let read_price = p.cache_hit_per_mtok.unwrap_or(p.input_per_mtok);
            let write_price = p.cache_write_per_mtok.unwrap_or(p.input_per_mtok);
            total += (fresh as f64 * p.input_per_mtok
                + read as f64 * read_price
                + written as f64 * write_price
                + t.output_tokens as f64 * p.output_per_mtok)
                / 1_000_000.0;
        }
        Some((total * 1e9).round() / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
            total_tokens: i + o,
            cache_read_tokens: None,
            cache_write_tokens: None,
            unreported: Default::default(),
        }
    }

    #[test]
    fn attributes_to_caller_and_model() {
        let l = Ledger::default();
        l.record(true, "a", Some(&u(10, 5)));
        l.record(false, "b", Some(&u(100, 50)));
        assert_eq!(l.record(false, "b", None), 165);
        let s = l.snapshot();
        assert_eq!(
            s.lead,
            UsageTotals {
                input_tokens: 10,
                output_tokens: 5,
                total_tokens: 15
            }
        );
        assert_eq!(s.subagents.total_tokens, 150);
        assert_eq!(s.total_tokens, 165);
        assert_eq!(s.by_model.len(), 2);
        assert_eq!(s.cost_usd, None);
    }

    #[test]
    fn cost_needs_every_model_priced() {
        let mut prices = HashMap::new();
        prices.insert(
            "a".to_string(),
            Price {
                input_per_mtok: 1.0,
                output_per_mtok: 2.0,
                cache_hit_per_mtok: None,
                cache_write_per_mtok: None,
            },
        );
        let l = Ledger::new(prices);
        l.record(true, "a", Some(&u(1_000_000, 500_000)));
        assert_eq!(l.snapshot().cost_usd, Some(2.0));
        l.record(false, "b", Some(&u(1, 1)));
        assert_eq!(l.snapshot().cost_usd, None);
    }

    #[test]
    fn cache_reads_and_writes_have_their_own_prices() {
        let price = Price {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
            cache_hit_per_mtok: Some(0.3),
            cache_write_per_mtok: Some(3.75),
        };
        let l = Ledger::new(HashMap::from([("c".to_string(), price)]));
        // 1M uncached + 2M read + 4M written (input counts all 7M), 1M out.
        let usage = Usage {
            input_tokens: 7_000_000,
            output_tokens: 1_000_000,
            total_tokens: 8_000_000,
            cache_read_tokens: Some(2_000_000),
            cache_write_tokens: Some(4_000_000),
            unreported: Default::default(),
        };
        l.record(true, "c", Some(&usage));
        assert_eq!(l.snapshot().cost_usd, Some(3.0 + 0.6 + 15.0 + 15.0));
        // Without cache prices, both parts are billed as input.
        let plain = Price {
            cache_hit_per_mtok: None,
            cache_write_per_mtok: None,
            ..price
        };
        let l = Ledger::new(HashMap::from([("c".to_string(), plain)]));
        l.record(true, "c", Some(&usage));
        assert_eq!(l.snapshot().cost_usd, Some(21.0 + 15.0));
        // Reported parts larger than the input are clamped, never negative.
        let l = Ledger::new(HashMap::from([("c".to_string(), price)]));
        let odd = Usage {
            input_tokens: 1_000_000,
            output_tokens: 0,
            total_tokens: 1_000_000,
            cache_read_tokens: Some(600_000),
            cache_write_tokens: Some(900_000),
            unreported: Default::default(),
        };
        l.record(true, "c", Some(&odd));
        assert_eq!(l.snapshot().cost_usd, Some(0.6 * 0.3 + 0.4 * 3.75));
    }

    #[test]
    fn absurd_usage_saturates_instead_of_wrapping() {
        let l = Ledger::default();
        let huge = Usage {
            input_tokens: u64::MAX,
            output_tokens: 1,
            total_tokens: u64::MAX,
            cache_read_tokens: Some(u64::MAX),
            cache_write_tokens: None,
            unreported: Default::default(),
        };
        l.record(true, "m", Some(&huge));
        l.record(false, "m", Some(&huge));
        let s = l.snapshot();
        assert_eq!(s.total_tokens, u64::MAX);
        assert_eq!(s.by_model["m"].input_tokens, u64::MAX);
    }

    #[test]
    fn a_called_model_without_usage_still_appears() {
        let l = Ledger::default();
        l.record(true, "m", None);
        assert_eq!(l.snapshot().by_model["m"], UsageTotals::default());
    }
}
