//! Model configuration: defaults, then `$BATON_HOME/config.toml`, then the project's
//! `baton.toml`, then the environment, then command-line flags. The API key only ever comes
//! from an environment variable and is never printed.

use crate::endpoint;
use crate::error::LlmError;
use crate::price::{self, Price};
use crate::wire::{BodyOptions, CapField};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

// Defined with the request body that sends it; kept at its old public path.
pub use crate::wire::DEFAULT_MAX_COMPLETION_TOKENS;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's endpoint, the default base URL of `api = "anthropic"`.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The wire protocol spoken to the endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Api {
    /// `POST {base_url}/chat/completions`, OpenAI's Chat Completions (most providers).
    #[default]
    OpenAi,
    /// `POST {base_url}/messages`, Anthropic's Messages API (prompt caching, thinking blocks).
    Anthropic,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    /// The environment variable holding the key when `api_key_env` is not set.
    pub fn default_key_env(self) -> &'static str {
        match self {
            Api::OpenAi => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The endpoint used when no base URL is set.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Api::OpenAi => DEFAULT_BASE_URL,
            Api::Anthropic => ANTHROPIC_BASE_URL,
        }
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Api {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Api, LlmError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Api::OpenAi),
            "anthropic" => Ok(Api::Anthropic),
            other => Err(LlmError::Config(format!(
                "api must be \"openai\" or \"anthropic\", not {other:?}"
            ))),
        }
    }
}

/// An API key. Its `Debug` never shows it, and it has no `Display` or `Serialize`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// The wire protocol (`[llm] api`, `--api`): chosen by itself as `anthropic` when the
    /// base URL's host is Anthropic's and nothing set it.
    pub api: Api,
    pub base_url: String,
    /// Which setting chose `base_url`, for error messages.
    pub base_url_source: Setting,
    pub model: Option<String>,
    pub api_key_env: String,
    pub api_key: Option<ApiKey>,
    /// Per request: time to the response headers, and between two streamed chunks.
    pub timeout: Duration,
    pub max_retries: u32,
    pub temperature: Option<f32>,
    pub stream: bool,
    /// First retry delay; doubles each retry (with jitter) up to `max_backoff`.
    pub retry_base_delay: Duration,
    /// The longest wait between two attempts; a longer `Retry-After` is clamped to it.
    pub max_backoff: Duration,
    /// The most bytes one answer may have (streamed or not, error bodies included): an endless
    /// answer is cut there instead of filling memory.
    pub max_response_bytes: usize,
    /// The whole `chat()` call, retries and waits included: a server that trickles chunks
    /// forever cannot hold a run for longer.
    pub max_call: Duration,
    /// The context window of the configured model (`[llm] context_tokens`), if set.
    pub context_tokens: Option<u64>,
    /// Context windows per model name (`[models."<name>"] context_tokens`).
    pub model_context_tokens: BTreeMap<String, u64>,
    /// The completion cap every request carries (`[llm] max_completion_tokens`).
    pub max_completion_tokens: u32,
    /// Anthropic's extended thinking (`[llm] thinking_tokens`): the thinking budget of each
    /// answer, within the completion cap. Not sent to OpenAI-compatible endpoints.
    pub thinking_tokens: Option<u32>,
    /// The body field of that cap (`[llm] completion_cap_field`); `None`: chosen by endpoint.
    pub completion_cap_field: Option<CapField>,
    /// Send `prompt_cache_key` (`[llm] prompt_cache_key`); `None`: only to OpenAI's endpoint,
    /// the provider known to take it.
    pub prompt_cache_key: Option<bool>,
    /// Prices per model name (`[models."<name>"] price`), over the built-in table.
    pub model_prices: BTreeMap<String, Price>,
}

/// The smallest thinking budget Anthropic accepts.
pub const MIN_THINKING_TOKENS: u32 = 1_024;

/// Bounds of `max_completion_tokens`.
const MAX_COMPLETION_TOKENS_RANGE: std::ops::RangeInclusive<u32> = 16..=1_000_000;

/// Context windows of well-known models, by name prefix (the part after a `vendor/`),
/// the more specific prefixes first. Anything else gets [`DEFAULT_CONTEXT_TOKENS`].
const KNOWN_CONTEXT_TOKENS: &[(&str, u64)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 65_536),
    ("llama3.1", 131_072),
    ("llama-3.1", 131_072),
    ("qwen2.5", 32_768),
];

/// What a model gets when nothing says how large its window is.
pub const DEFAULT_CONTEXT_TOKENS: u64 = 32_768;
/// Bounds of `context_tokens`.
const CONTEXT_TOKENS_RANGE: std::ops::RangeInclusive<u64> = 1_024..=100_000_000;

/// The context window of a well-known model, from its name.
pub fn known_context_tokens(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    KNOWN_CONTEXT_TOKENS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, n)| *n)
}

pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
pub const DEFAULT_MAX_CALL: Duration = Duration::from_secs(600);
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A cap beyond which `max_response_bytes` is no cap at all.
const MAX_RESPONSE_BYTES_LIMIT: u64 = 1024 * 1024 * 1024;
/// Limits of the time settings, in seconds.
const MAX_TIMEOUT_S: f64 = 3600.0;
const MAX_CALL_S: f64 = 86_400.0;

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            api: Api::OpenAi,
            base_url: DEFAULT_BASE_URL.to_string(),
            base_url_source: Setting::Default,
            model: None,
            api_key_env: "OPENAI_API_KEY".to_string(),
            api_key: None,
            timeout: Duration::from_secs(120),
            max_retries: 4,
            temperature: None,
            stream: true,
            retry_base_delay: Duration::from_millis(500),
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_call: DEFAULT_MAX_CALL,
            context_tokens: None,
            model_context_tokens: BTreeMap::new(),
            max_completion_tokens: DEFAULT_MAX_COMPLETION_TOKENS,
            thinking_tokens: None,
            completion_cap_field: None,
            prompt_cache_key: None,
            model_prices: BTreeMap::new(),
        }
    }
}

/// The `[llm]` table of a config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmTable {
    api: Option<String>,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    timeout_s: Option<f64>,
    max_retries: Option<u32>,
    temperature: Option<f32>,
    stream: Option<bool>,
    max_response_bytes: Option<u64>,
    max_call_s: Option<f64>,
    context_tokens: Option<u64>,
    max_completion_tokens: Option<u32>,
    thinking_tokens: Option<u32>,
    completion_cap_field: Option<String>,
    prompt_cache_key: Option<bool>,
}

/// A `[models."<name>"]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelTable {
    context_tokens: Option<u64>,
    price: Option<Price>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    llm: Option<LlmTable>,
    #[serde(default)]
    models: BTreeMap<String, ModelTable>,
}

/// Where a setting came from, named as the user would write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// Built in (`https://api.openai.com/v1`).
    Default,
    /// `$BATON_HOME/config.toml`, `[llm]`.
    HomeFile,
    /// The project's `baton.toml`, `[llm]`.
    ProjectFile,
    /// `OPENAI_BASE_URL` (or `BATON_MODEL`).
    Env(&'static str),
    /// What the run recorded when it was started (a continuation).
    Recorded,
    /// A command-line flag or an API field.
    Flag(&'static str),
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Default => f.write_str("the default"),
            Setting::HomeFile => f.write_str("$BATON_HOME/config.toml [llm] base_url"),
            Setting::ProjectFile => f.write_str("baton.toml [llm] base_url"),
            Setting::Env(name) => f.write_str(name),
            Setting::Recorded => f.write_str("the endpoint the run was started with"),
            Setting::Flag(name) => f.write_str(name),
        }
    }
}

/// What the configuration files chose that depends on the API, settled once all is read.
#[derive(Debug, Default)]
struct FileChoices {
    api: Option<Api>,
    /// `api_key_env` was set: it holds whatever the API.
    api_key_env: bool,
}

/// Values given on the command line; each wins over every other source.
#[derive(Debug, Clone, Default)]
pub struct LlmOverrides {
    /// `--api`.
    pub api: Option<Api>,
    /// The API a run being continued was started with.
    pub recorded_api: Option<Api>,
    pub base_url: Option<String>,
    /// How `base_url` was given (default: `--base-url`).
    pub base_url_flag: Option<&'static str>,
    pub model: Option<String>,
    /// What a run being continued recorded: above the files, below the environment and flags.
    pub recorded_model: Option<String>,
    pub recorded_base_url: Option<String>,
    pub timeout_s: Option<f64>,
    pub max_retries: Option<u32>,
    pub temperature: Option<f32>,
    pub stream: Option<bool>,
}

impl LlmConfig {
    /// Loads the configuration. `env` reads an environment variable (a function, so tests
    /// need not touch the process environment).
    pub fn load(
        home: Option<&Path>,
        project: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &LlmOverrides,
    ) -> Result<LlmConfig, LlmError> {
        let mut config = LlmConfig::default();
        let mut files = FileChoices::default();
        if let Some(home) = home {
            config.apply_file(&home.join("config.toml"), Setting::HomeFile, &mut files)?;
        }
        if let Some(project) = project {
            config.apply_file(
                &project.join("baton.toml"),
                Setting::ProjectFile,
                &mut files,
            )?;
        }
        let o = overrides;
        // What a continued run recorded: over the files, under the environment and the flags
        // of the command that continues it.
        if let Some(v) = &o.recorded_base_url {
            config.base_url = v.clone();
            config.base_url_source = Setting::Recorded;
        }
        if let Some(v) = &o.recorded_model {
            config.model = Some(v.clone());
        }
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if let Some(url) = env("OPENAI_BASE_URL") {
            config.base_url = url;
            config.base_url_source = Setting::Env("OPENAI_BASE_URL");
        }
        if let Some(model) = env("BATON_MODEL") {
            config.model = Some(model);
        }
        if let Some(v) = &o.base_url {
            config.base_url = v.clone();
            config.base_url_source = Setting::Flag(o.base_url_flag.unwrap_or("--base-url"));
        }
        if let Some(v) = &o.model {
            config.model = Some(v.clone());
        }
        if let Some(v) = o.timeout_s {
            config.timeout = seconds("timeout_s", v, MAX_TIMEOUT_S)?;
        }
        if let Some(v) = o.max_retries {
            config.max_retries = v;
        }
        if o.temperature.is_some() {
            config.temperature = o.temperature;
        }
        if let Some(v) = o.stream {
            config.stream = v;
        }
        // The API: the flag, else what the run recorded, else the files, else Anthropic's
        // own host speaks Anthropic's protocol.
        let chosen = o.api.or(o.recorded_api).or(files.api);
        config.api = chosen.unwrap_or_else(|| {
            if endpoint::host(&config.base_url).as_deref() == Some("api.anthropic.com") {
                Api::Anthropic
            } else {
                Api::OpenAi
            }
        });
        if config.base_url_source == Setting::Default {
            config.base_url = config.api.default_base_url().to_string();
        }
        if !files.api_key_env {
            config.api_key_env = config.api.default_key_env().to_string();
        }
        config.api_key = env(&config.api_key_env).map(ApiKey::new);
        if let Some(budget) = config.thinking_tokens {
            // Anthropic's floor, and room for an answer after the thinking.
            if budget < MIN_THINKING_TOKENS || budget >= config.max_completion_tokens {
                return Err(LlmError::Config(format!(
                    "thinking_tokens must be at least {MIN_THINKING_TOKENS} and less than max_completion_tokens ({}), not {budget}",
                    config.max_completion_tokens
                )));
            }
        }
        config.base_url = config.base_url.trim_end_matches('/').to_string();
        endpoint::check(&config.base_url).map_err(|why| {
            LlmError::Config(format!(
                "base_url '{}' (from {}) {why}",
                endpoint::shown(&config.base_url),
                config.base_url_source
            ))
        })?;
        Ok(config)
    }

    /// The endpoint as it may be shown and recorded: no user, password, query or fragment.
    pub fn endpoint_shown(&self) -> String {
        endpoint::shown(&self.base_url)
    }

    /// The endpoint a run may remember, `None` when it carries a secret (a user or password,
    /// a query): remembering it would write the secret into the store.
    pub fn endpoint_recordable(&self) -> Option<String> {
        endpoint::recordable(&self.base_url)
    }

    /// A key is needed and missing: the endpoint is not on this machine (a local server such
    /// as Ollama needs none) and the key variable is unset. Said before any request is sent.
    pub fn check_key(&self) -> Result<(), LlmError> {
        if self.api_key.is_some() || endpoint::is_loopback(&self.base_url) {
            return Ok(());
        }
        Err(LlmError::KeyMissing {
            variable: self.api_key_env.clone(),
            endpoint: self.endpoint_shown(),
            setting: self.base_url_source.to_string(),
        })
    }

    fn apply_file(
        &mut self,
        path: &Path,
        source: Setting,
        files: &mut FileChoices,
    ) -> Result<(), LlmError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(LlmError::Config(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        let file: ConfigFile = toml::from_str(&text).map_err(|e| {
            let hint = if text.contains("api_key =") || text.contains("api_key=") {
                " (keys do not belong in files: set api_key_env to the name of an environment variable holding the key)"
            } else {
                ""
            };
            LlmError::Config(format!("{}: {}{hint}", path.display(), e.message()))
        })?;
        for (name, table) in file.models {
            if let Some(p) = table.price {
                if !p.is_valid() {
                    return Err(LlmError::Config(format!(
                        "{}: [models.\"{name}\"] price: prices are USD per million tokens, finite and not negative",
                        path.display()
                    )));
                }
                self.model_prices.insert(name.clone(), p);
            }
            if let Some(v) = table.context_tokens {
                self.model_context_tokens
                    .insert(name, context_tokens(path, v)?);
            }
        }
        let Some(t) = file.llm else { return Ok(()) };
        if let Some(v) = t.api {
            files.api = Some(
                v.parse()
                    .map_err(|e: LlmError| LlmError::Config(format!("{}: {e}", path.display())))?,
            );
        }
        if let Some(v) = t.context_tokens {
            self.context_tokens = Some(context_tokens(path, v)?);
        }
        if let Some(v) = t.base_url {
            self.base_url = v;
            self.base_url_source = source;
        }
        if let Some(v) = t.model {
            self.model = Some(v);
        }
        if let Some(v) = t.api_key_env {
            self.api_key_env = v;
            files.api_key_env = true;
        }
        if let Some(v) = t.timeout_s {
            self.timeout = seconds("timeout_s", v, MAX_TIMEOUT_S)?;
        }
        if let Some(v) = t.max_retries {
            self.max_retries = v;
        }
        if t.temperature.is_some() {
            self.temperature = t.temperature;
        }
        if let Some(v) = t.stream {
            self.stream = v;
        }
        if let Some(v) = t.max_response_bytes {
            if !(1..=MAX_RESPONSE_BYTES_LIMIT).contains(&v) {
                return Err(LlmError::Config(format!(
                    "{}: max_response_bytes must be between 1 and {MAX_RESPONSE_BYTES_LIMIT}, not {v}",
                    path.display()
                )));
            }
            // Fits: the limit is far below usize::MAX on every supported target.
            self.max_response_bytes = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = t.max_call_s {
            self.max_call = seconds("max_call_s", v, MAX_CALL_S)?;
        }
        if let Some(v) = t.max_completion_tokens {
            if !MAX_COMPLETION_TOKENS_RANGE.contains(&v) {
                return Err(LlmError::Config(format!(
                    "{}: max_completion_tokens must be between {} and {}, not {v}",
                    path.display(),
                    MAX_COMPLETION_TOKENS_RANGE.start(),
                    MAX_COMPLETION_TOKENS_RANGE.end()
                )));
            }
            self.max_completion_tokens = v;
        }
        if let Some(v) = t.thinking_tokens {
            self.thinking_tokens = Some(v);
        }
        if let Some(v) = t.completion_cap_field {
            self.completion_cap_field = Some(match v.as_str() {
                "max_tokens" => CapField::MaxTokens,
                "max_completion_tokens" => CapField::MaxCompletionTokens,
                other => {
                    return Err(LlmError::Config(format!(
                        "{}: completion_cap_field must be \"max_tokens\" or \"max_completion_tokens\", not {other:?}",
                        path.display()
                    )));
                }
            });
        }
        if t.prompt_cache_key.is_some() {
            self.prompt_cache_key = t.prompt_cache_key;
        }
        Ok(())
    }

    /// The price of the configured model: its `[models."<name>"] price`, else the built-in
    /// table's; `None` when neither knows it.
    pub fn price(&self) -> Option<Price> {
        let model = self.model.as_deref()?;
        self.price_of(model)
    }

    /// The price of `model` under this configuration.
    pub fn price_of(&self, model: &str) -> Option<Price> {
        self.model_prices
            .get(model)
            .copied()
            .or_else(|| price::built_in_price(model))
    }

    /// Whether the endpoint is OpenAI's own (or Azure OpenAI), whose reasoning models take only
    /// `max_completion_tokens` and which accepts `prompt_cache_key`.
    fn is_openai(&self) -> bool {
        let host = endpoint::host(&self.base_url).unwrap_or_default();
        host == "api.openai.com" || host.ends_with(".openai.azure.com")
    }

    /// How request bodies are written: the cap and its field, and the cache key switch.
    pub fn body_options(&self) -> BodyOptions {
        BodyOptions {
            cap_field: self.completion_cap_field.unwrap_or(if self.is_openai() {
                CapField::MaxCompletionTokens
            } else {
                CapField::MaxTokens
            }),
            default_cap: self.max_completion_tokens,
            prompt_cache_key: self.prompt_cache_key.unwrap_or_else(|| self.is_openai()),
        }
    }

    /// The context window of the configured model: its `[models."<name>"]` entry, else
    /// `[llm] context_tokens`, else the table of well-known models, else 32,768.
    pub fn context_tokens(&self) -> u64 {
        let model = self.model.as_deref().unwrap_or("");
        self.model_context_tokens
            .get(model)
            .copied()
            .or(self.context_tokens)
            .or_else(|| known_context_tokens(model))
            .unwrap_or(DEFAULT_CONTEXT_TOKENS)
    }

    /// The model name, or a configuration error telling how to set one.
    pub fn require_model(&self) -> Result<&str, LlmError> {
        self.model.as_deref().ok_or_else(|| {
            LlmError::Config("no model is set: pass --model, set BATON_MODEL, or put model = \"...\" under [llm] in baton.toml".into())
        })
    }
}

fn context_tokens(path: &Path, v: u64) -> Result<u64, LlmError> {
    if CONTEXT_TOKENS_RANGE.contains(&v) {
        return Ok(v);
    }
    Err(LlmError::Config(format!(
        "{}: context_tokens must be between {} and {}, not {v}",
        path.display(),
        CONTEXT_TOKENS_RANGE.start(),
        CONTEXT_TOKENS_RANGE.end()
    )))
}

fn seconds(key: &str, v: f64, max: f64) -> Result<Duration, LlmError> {
    if !(v.is_finite() && v > 0.0 && v <= max) {
        return Err(LlmError::Config(format!(
            "{key} must be between 0 and {max} seconds, not {v}"
        )));
    }
    Duration::try_from_secs_f64(v).map_err(|e| LlmError::Config(format!("{key}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_api_is_chosen_by_setting_or_by_anthropics_host() {
        let project = tempfile::tempdir().unwrap();
        let vars: HashMap<&str, &str> =
            HashMap::from([("ANTHROPIC_API_KEY", "sk-ant"), ("OPENAI_API_KEY", "sk-oa")]);
        let env = |k: &str| vars.get(k).map(|v| v.to_string());
        let load = |o: &LlmOverrides| LlmConfig::load(None, Some(project.path()), &env, o);
        // Nothing set: OpenAI's protocol, endpoint and key.
        let c = load(&LlmOverrides::default()).unwrap();
        assert_eq!(
            (c.api, c.base_url.as_str()),
            (Api::OpenAi, DEFAULT_BASE_URL)
        );
        assert_eq!(c.api_key_env, "OPENAI_API_KEY");
        // `--api anthropic`: Anthropic's endpoint and key variable.
        let flag = LlmOverrides {
            api: Some(Api::Anthropic),
            ..LlmOverrides::default()
        };
        let c = load(&flag).unwrap();
        assert_eq!(
            (c.api, c.base_url.as_str()),
            (Api::Anthropic, ANTHROPIC_BASE_URL)
        );
        assert_eq!(c.api_key_env, "ANTHROPIC_API_KEY");
        assert!(c.api_key.is_some());
        // Anthropic's host chooses its protocol by itself; another host does not.
        let host = |url: &str| LlmOverrides {
            base_url: Some(url.into()),
            ..LlmOverrides::default()
        };
        assert_eq!(
            load(&host("https://api.anthropic.com/v1/")).unwrap().api,
            Api::Anthropic
        );
        assert_eq!(
            load(&host("http://127.0.0.1:9/v1")).unwrap().api,
            Api::OpenAi
        );
        // `[llm] api` in a file, with its own key variable kept; a wrong value is located.
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\napi = \"anthropic\"\napi_key_env = \"OPENAI_API_KEY\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        )
        .unwrap();
        let c = load(&LlmOverrides::default()).unwrap();
        assert_eq!(
            (c.api, c.api_key_env.as_str()),
            (Api::Anthropic, "OPENAI_API_KEY")
        );
        assert_eq!(c.base_url, "http://127.0.0.1:9/v1");
        // The flag wins over the file.
        let openai = LlmOverrides {
            api: Some(Api::OpenAi),
            ..LlmOverrides::default()
        };
        assert_eq!(load(&openai).unwrap().api, Api::OpenAi);
        // A thinking budget within the completion cap; one at or over it is refused.
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\napi = \"anthropic\"\nthinking_tokens = 4096\nmax_completion_tokens = 16000\n",
        )
        .unwrap();
        assert_eq!(
            load(&LlmOverrides::default()).unwrap().thinking_tokens,
            Some(4096)
        );
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\nthinking_tokens = 9000\n",
        )
        .unwrap();
        let e = load(&LlmOverrides::default()).unwrap_err().to_string();
        assert!(e.contains("thinking_tokens") && e.contains("8192"), "{e}");
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\napi = \"gemini\"\n",
        )
        .unwrap();
        let e = load(&LlmOverrides::default()).unwrap_err().to_string();
        assert!(e.contains("baton.toml") && e.contains("\"gemini\""), "{e}");
    }

    #[test]
    fn precedence_is_home_project_env_flags() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), "[llm]\nmodel = \"home-model\"\nbase_url = \"http://home/v1\"\ntimeout_s = 30\napi_key_env = \"MY_KEY\"\n").unwrap();
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\nmodel = \"project-model\"\nstream = false\n",
        )
        .unwrap();
        let vars: HashMap<&str, &str> =
            HashMap::from([("MY_KEY", "sk-secret"), ("OPENAI_API_KEY", "other")]);
        let env = |k: &str| vars.get(k).map(|v| v.to_string());
        let c = LlmConfig::load(
            Some(home.path()),
            Some(project.path()),
            &env,
            &LlmOverrides::default(),
        )
        .unwrap();
        assert_eq!(c.model.as_deref(), Some("project-model"));
        assert_eq!(c.base_url, "http://home/v1");
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert!(!c.stream);
        assert_eq!(c.api_key, Some(ApiKey::new("sk-secret")));
        assert!(
            !format!("{c:?}").contains("sk-secret"),
            "the key never shows in Debug"
        );

        let vars2: HashMap<&str, &str> = HashMap::from([
            ("MY_KEY", "k"),
            ("BATON_MODEL", "env-model"),
            ("OPENAI_BASE_URL", "http://env/v1/"),
        ]);
        let env2 = |k: &str| vars2.get(k).map(|v| v.to_string());
        let c = LlmConfig::load(
            Some(home.path()),
            Some(project.path()),
            &env2,
            &LlmOverrides::default(),
        )
        .unwrap();
        assert_eq!(
            (c.model.as_deref(), c.base_url.as_str()),
            (Some("env-model"), "http://env/v1")
        );
        let flags = LlmOverrides {
            model: Some("flag-model".into()),
            ..Default::default()
        };
        let c = LlmConfig::load(Some(home.path()), Some(project.path()), &env2, &flags).unwrap();
        assert_eq!(c.model.as_deref(), Some("flag-model"));
    }

    #[test]
    fn the_setting_that_chose_the_endpoint_is_known() {
        let project = tempfile::tempdir().unwrap();
        let none = LlmOverrides::default();
        let load = |env: &dyn Fn(&str) -> Option<String>, o: &LlmOverrides| {
            LlmConfig::load(None, Some(project.path()), env, o).unwrap()
        };
        assert_eq!(load(&|_| None, &none).base_url_source, Setting::Default);
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\nbase_url = \"http://file/v1\"\n",
        )
        .unwrap();
        let c = load(&|_| None, &none);
        assert_eq!(c.base_url_source.to_string(), "baton.toml [llm] base_url");
        let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://env/v1".to_string());
        assert_eq!(
            load(&env, &none).base_url_source.to_string(),
            "OPENAI_BASE_URL"
        );
        // A continued run's record beats the files; the environment and flags beat it.
        let recorded = LlmOverrides {
            recorded_model: Some("started-with".into()),
            recorded_base_url: Some("http://recorded/v1".into()),
            ..Default::default()
        };
        let c = load(&|_| None, &recorded);
        assert_eq!(
            (c.model.as_deref(), c.base_url.as_str()),
            (Some("started-with"), "http://recorded/v1")
        );
        assert_eq!(c.base_url_source, Setting::Recorded);
        let c = load(&env, &recorded);
        assert_eq!(
            (c.model.as_deref(), c.base_url.as_str()),
            (Some("started-with"), "http://env/v1")
        );
        let flagged = LlmOverrides {
            model: Some("flag".into()),
            base_url: Some("http://flag/v1".into()),
            ..recorded
        };
        let c = load(&env, &flagged);
        assert_eq!(
            (c.model.as_deref(), c.base_url.as_str()),
            (Some("flag"), "http://flag/v1")
        );
        assert_eq!(c.base_url_source.to_string(), "--base-url");
    }

    #[test]
    fn keys_in_files_and_bad_values_are_refused() {
        let project = tempfile::tempdir().unwrap();
        std::fs::write(
            project.path().join("baton.toml"),
            "[llm]\napi_key = \"sk-123\"\n",
        )
        .unwrap();
        let err = LlmConfig::load(
            None,
            Some(project.path()),
            &|_| None,
            &LlmOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("environment variable"), "{err}");
        assert!(!err.to_string().contains("sk-123"));
        let bad = LlmOverrides {
            base_url: Some("ftp://x".into()),
            ..Default::default()
        };
        assert_eq!(
            LlmConfig::load(None, None, &|_| None, &bad)
                .unwrap_err()
                .code(),
            "LLM_CONFIG_INVALID"
        );
        assert_eq!(
            LlmConfig::default().require_model().unwrap_err().code(),
            "LLM_CONFIG_INVALID"
        );
    }

    #[test]
    fn context_tokens_per_model_then_llm_then_known_models_then_32k() {
        let project = tempfile::tempdir().unwrap();
        let load = |text: &str, model: Option<&str>| {
            std::fs::write(project.path().join("baton.toml"), text).unwrap();
            LlmConfig::load(
                None,
                Some(project.path()),
                &|_| None,
                &LlmOverrides {
                    model: model.map(str::to_owned),
                    ..Default::default()
                },
            )
        };
        assert_eq!(
            load("", Some("gpt-4o-mini")).unwrap().context_tokens(),
            128_000
        );
        assert_eq!(
            load("", Some("openai/gpt-4.1")).unwrap().context_tokens(),
            1_047_576
        );
        assert_eq!(load("", Some("gpt-4")).unwrap().context_tokens(), 8_192);
        assert_eq!(
            load("", Some("my-local-model")).unwrap().context_tokens(),
            32_768
        );
        assert_eq!(load("", None).unwrap().context_tokens(), 32_768);
        let text = "[llm]\ncontext_tokens = 16384\n[models.\"qwen2.5-coder:14b\"]\ncontext_tokens = 65536\n";
        assert_eq!(load(text, Some("gpt-4o")).unwrap().context_tokens(), 16_384);
        assert_eq!(
            load(text, Some("qwen2.5-coder:14b"))
                .unwrap()
                .context_tokens(),
            65_536
        );
        for bad in [
            "[llm]\ncontext_tokens = 10\n",
            "[models.x]\ncontext_tokens = 0\n",
            "[models.x]\ncontext = 1\n",
        ] {
            assert_eq!(
                load(bad, None).unwrap_err().code(),
                "LLM_CONFIG_INVALID",
                "{bad}"
            );
        }
    }

    #[test]
    fn answer_size_and_call_time_caps() {
        let d = LlmConfig::default();
        assert_eq!(d.max_response_bytes, 4 * 1024 * 1024);
        assert_eq!(d.max_call, Duration::from_secs(600));
        assert_eq!(d.max_backoff, Duration::from_secs(30));
        let project = tempfile::tempdir().unwrap();
        let load = |text: &str| {
            std::fs::write(project.path().join("baton.toml"), text).unwrap();
            LlmConfig::load(
                None,
                Some(project.path()),
                &|_| None,
                &LlmOverrides::default(),
            )
        };
        let c = load("[llm]\nmax_response_bytes = 65536\nmax_call_s = 90\n").unwrap();
        assert_eq!(c.max_response_bytes, 65536);
        assert_eq!(c.max_call, Duration::from_secs(90));
        for bad in [
            "[llm]\nmax_response_bytes = 0\n",
            "[llm]\nmax_response_bytes = 99999999999\n",
            "[llm]\nmax_call_s = 0\n",
            "[llm]\nmax_call_s = 1e300\n",
            "[llm]\nmax_call_s = -1\n",
        ] {
            let err = load(bad).unwrap_err();
            assert_eq!(err.code(), "LLM_CONFIG_INVALID", "{bad}");
        }
    }

    #[test]
    fn prices_caps_and_the_cache_key_switch() {
        let project = tempfile::tempdir().unwrap();
        let load = |text: &str, model: &str, url: &str| {
            std::fs::write(project.path().join("baton.toml"), text).unwrap();
            LlmConfig::load(
                None,
                Some(project.path()),
                &|_| None,
                &LlmOverrides {
                    model: Some(model.into()),
                    base_url: Some(url.into()),
                    ..Default::default()
                },
            )
        };
        let local = load("", "gpt-4.1", "http://127.0.0.1:1/v1").unwrap();
        assert_eq!(local.price(), price::built_in_price("gpt-4.1"));
        let o = local.body_options();
        assert_eq!(
            (o.cap_field, o.default_cap, o.prompt_cache_key),
            (CapField::MaxTokens, 8192, false)
        );
        let openai = load("", "gpt-4.1", "https://api.openai.com/v1").unwrap();
        let o = openai.body_options();
        assert_eq!(
            (o.cap_field, o.prompt_cache_key),
            (CapField::MaxCompletionTokens, true)
        );
        assert_eq!(
            load("", "my-model", "http://127.0.0.1:1/v1")
                .unwrap()
                .price(),
            None
        );
        let text = "[llm]\nmax_completion_tokens = 2048\ncompletion_cap_field = \"max_completion_tokens\"\nprompt_cache_key = true\n[models.\"my-model\"]\nprice = { input = 2.0, cached_input = 0.5, output = 8.0 }\n";
        let c = load(text, "my-model", "http://127.0.0.1:1/v1").unwrap();
        assert_eq!(c.price(), Some(Price::new(2.0, 0.5, 8.0)));
        let o = c.body_options();
        assert_eq!(
            (o.cap_field, o.default_cap, o.prompt_cache_key),
            (CapField::MaxCompletionTokens, 2048, true)
        );
        for bad in [
            "[models.x]\nprice = { input = -1.0, output = 1.0 }\n",
            "[models.x]\nprice = { input = 1.0 }\n",
            "[models.x]\nprice = { input = 1.0, output = 1.0, extra = 2 }\n",
            "[llm]\nmax_completion_tokens = 0\n",
            "[llm]\ncompletion_cap_field = \"max\"\n",
        ] {
            assert_eq!(
                load(bad, "x", "http://127.0.0.1:1/v1").unwrap_err().code(),
                "LLM_CONFIG_INVALID",
                "{bad}"
            );
        }
    }
}
