use std::fs;
use std::path::Path;

use super::*;
use crate::ModelLimits;
use crate::{BoxFuture, CallContext, ChatRequest, ModelError, ModelResponse};
use deerflow_config::{self as config, ConfigError, Env, HttpSettings, LoadOptions};

fn resolved(row: &'static ProviderInfo, http: Option<HttpSettings>) -> ResolvedModel {
    ResolvedModel {
        name: "m".into(),
        row,
        model: "x".into(),
        http,
        cassette: None,
        price: None,
        context_window: None,
        supports_vision: false,
    }
}

fn row(name: &str) -> &'static ProviderInfo {
    &PROVIDERS.iter().find(|p| p.info.name == name).unwrap().info
}

/// Pinned loosely on purpose: a new row must not need an edit here.
#[test]
fn the_table_lists_every_provider_once() {
    let names: Vec<&str> = PROVIDERS.iter().map(|p| p.info.name).collect();
    for (i, name) in names.iter().enumerate() {
        assert!(!names[..i].contains(name), "{name} twice");
    }
    for name in ["openai", "anthropic", "replay"] {
        assert!(names.contains(&name), "{name}");
    }
    let rest = PROVIDERS
        .iter()
        .filter(|p| p.info.deerflow_classes == DeerFlowClasses::Rest)
        .count();
    assert_eq!(
        rest, 1,
        "one row takes the DeerFlow classes no other claims"
    );
    let (forms, examples) = (providers().spec_forms(), providers().spec_examples());
    for want in ["openai:MODEL, ", "anthropic:MODEL", "replay:PATH"] {
        assert!(forms.contains(want), "{forms}");
    }
    for want in [
        "openai:gpt-4o-mini",
        "anthropic:claude-sonnet-4-5",
        "replay:PATH",
    ] {
        assert!(examples.contains(want), "{examples}");
    }
}

/// config's tests run against a copy of some rows; each must say what the real row says.
#[test]
fn config_tests_use_this_table() {
    for c in &config::testing::ROWS {
        let r = row(c.name);
        assert_eq!(
            (c.example_model, c.deerflow_classes),
            (r.example_model, r.deerflow_classes),
            "{}",
            c.name
        );
        match (&c.endpoint, &r.endpoint) {
            (None, None) => {}
            (Some(c), Some(r)) => {
                assert_eq!(
                    (c.key_vars, c.url_var, c.default_url, c.hosted),
                    (r.key_vars, r.url_var, r.default_url, r.hosted)
                );
                // config's copy stands for the family table with its answer for ids
                // of no known family.
                let max = |f: Option<fn(&str) -> u64>| f.map(|f| f("claude-x"));
                assert_eq!(max(c.default_max_tokens), max(r.default_max_tokens));
                let chat = HttpSettings::new("m", "http://h", None);
                assert_eq!((c.body_keys)(&chat), (r.body_keys)(&chat));
                for url in [" http://h/v1/ ", "https://x/v1", "http://h"] {
                    assert_eq!((c.normalize_base)(url), (r.normalize_base)(url), "{url}");
                }
            }
            _ => panic!("{}: endpoints differ", r.name),
        }
    }
}

#[test]
fn http_providers_build_from_their_settings() {
    for name in ["openai", "anthropic"] {
        let http = HttpSettings::new("x", "http://127.0.0.1:1/v1", None);
        assert!(build(&resolved(row(name), Some(http))).is_ok(), "{name}");
    }
}

#[test]
fn a_model_without_what_its_provider_needs_cannot_be_served() {
    static ELSEWHERE: ProviderInfo = ProviderInfo {
        name: "elsewhere",
        example_model: None,
        endpoint: None,
        deerflow_classes: DeerFlowClasses::None,
    };
    for row in [row("openai"), row("replay"), &ELSEWHERE] {
        let err = build(&resolved(row, None)).err();
        assert_eq!(
            err.as_deref(),
            Some(format!("model 'm' cannot be served (provider {})", row.name).as_str())
        );
    }
}

/// A provider that exists only here: its row is all it takes to be chosen by name, by
/// `--model fake:ID` and by a DeerFlow class, to be checked, and to be built.
static FAKE: &[Provider] = &[Provider {
    info: ProviderInfo {
        name: "fake",
        example_model: Some("f-1"),
        endpoint: Some(Endpoint {
            key_vars: &["FAKE_API_KEY", "FAKE_KEY"],
            url_var: "FAKE_BASE_URL",
            default_url: "https://api.fake.example/v1/",
            hosted: "api.fake.example",
            normalize_base: base_url::trimmed,
            default_max_tokens: None,
            body_keys: |_| &["model"],
        }),
        deerflow_classes: DeerFlowClasses::NameContains("Fake"),
    },
    build: build_fake,
}];

/// The settings reach the client: the output limit is the entry's `max_tokens`.
fn build_fake(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    let http = r.http.as_ref().ok_or_else(|| cannot_serve(r))?;
    let limits = ModelLimits {
        context_window: None,
        max_output_tokens: http.max_tokens,
    };
    Ok(Arc::new(Limited(limits)))
}

/// A model that only states its limits.
struct Limited(ModelLimits);

impl ChatModel for Limited {
    fn complete<'a>(
        &'a self,
        _: &'a ChatRequest,
        _: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async { Err(ModelError::Cancelled) })
    }

    fn limits(&self) -> ModelLimits {
        self.0
    }
}

#[test]
fn one_row_is_enough_for_a_new_provider() {
    let registry = Registry::new(FAKE);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    fs::write(
        &file,
        "models:\n - {name: mine, use: 'my.pkg:ChatFake', model: f-2, max_tokens: 77}\n \
         - {name: plain, use: fake, model: f-3, base_url: 'http://127.0.0.1:9/v1'}\n",
    )
    .unwrap();
    let opts = LoadOptions {
        explicit: Some(file),
        sets: Vec::new(),
        cwd: dir.path().to_path_buf(),
        providers: registry.providers(),
        mcp_configs: Vec::new(),
        model: None,
    };
    let cwd = Path::new("/");

    // Without its key, the hosted API is a missing secret, and `config check` says so.
    let check = config::check_with(&opts, &Env::empty());
    assert_eq!(check.problems, Vec::<String>::new());
    assert_eq!(
        check.warnings,
        [
            "models[0] ('mine') needs an API key: set api_key in the config or FAKE_API_KEY \
          (needed only when this model is used)"
        ]
    );
    let loaded = config::load_with(&opts, &Env::empty()).unwrap();
    let e = config::resolve_model_with(&loaded, "fake:f-1", cwd, &Env::empty()).unwrap_err();
    assert!(matches!(e, ConfigError::MissingSecret(_)));
    assert!(e.to_string().contains("set FAKE_API_KEY"), "{e}");
    let e = config::resolve_model_with(&loaded, "openai:gpt-4o", cwd, &Env::empty())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown model provider 'openai' in 'openai:gpt-4o': use fake:MODEL"),
        "{e}"
    );

    // With it, each way of naming the provider resolves to its row and builds its client.
    let env = Env::from_pairs([("FAKE_KEY", "k")]);
    let by_spec = config::resolve_model_with(&loaded, "fake:f-1", cwd, &env).unwrap();
    let http = by_spec.http.as_ref().unwrap();
    assert_eq!(
        (
            by_spec.provider(),
            http.base_url.as_str(),
            http.api_key.as_deref()
        ),
        ("fake", "https://api.fake.example/v1", Some("k"))
    );
    let by_class = config::resolve_model_with(&loaded, "mine", cwd, &env).unwrap();
    assert_eq!(
        (by_class.provider(), by_class.model.as_str()),
        ("fake", "f-2")
    );
    let local = config::resolve_model_with(&loaded, "plain", cwd, &Env::empty()).unwrap();
    assert_eq!(local.provider(), "fake");
    for r in [&by_spec, &local] {
        assert_eq!(registry.build(r).unwrap().limits(), ModelLimits::default());
    }
    let model = registry.build(&by_class).unwrap();
    assert_eq!(model.limits().max_output_tokens, Some(77));
    // deerflow's own table has no such row.
    assert_eq!(
        build(&by_class).err().as_deref(),
        Some("model 'mine' cannot be served (provider fake)")
    );
    let shown = config::show_json(&loaded);
    assert_eq!(shown["models"][1]["provider"], "fake");
}
