//! Token estimates for the context budget.
//!
//! OpenAI-family models (`gpt-4o`, `gpt-4.1`, `gpt-5`, `o1`/`o3`/`o4-mini`, `gpt-4`,
//! `gpt-3.5-turbo`, …) are counted with their real BPE (`o200k_base` or `cl100k_base`, via
//! `tiktoken-rs`). Every other model gets `ceil(ASCII bytes / 4) + non-ASCII characters`: about
//! chars/4 for English text and code, one token per CJK character. On the requests of the
//! reference run it is 14 % under to 4 % over the real `o200k_base` count (see
//! `docs/BENCHMARKS.md`); compression starts at 80 % of the budget, which absorbs that.
//!
//! Estimates are cached by a hash of the text, so the unchanged prefix of a growing window is
//! not counted again on every turn.

use baton_llm::{Message, ToolDef};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

/// Role, separators and the name of a message, as chat templates add them.
const MESSAGE_OVERHEAD: usize = 4;
/// Every request ends with the primer of the answer.
const REQUEST_OVERHEAD: usize = 3;
/// Texts are encoded in pieces of at most this many bytes: a hostile model's megabyte of one
/// repeated letter costs linear time, and the count differs by at most a token per piece.
const PIECE: usize = 16 * 1024;
/// Texts shorter than this are counted directly; caching them costs more than it saves.
const CACHE_MIN: usize = 256;
const CACHE_MAX_ENTRIES: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    O200k,
    Cl100k,
    /// `ceil(ASCII bytes / 4) + non-ASCII characters`.
    Chars,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
            Encoding::Chars => "chars/4",
        }
    }

    /// The encoding of `model`: a real BPE for OpenAI-family models, chars/4 otherwise.
    pub fn for_model(model: &str) -> Encoding {
        // Gateways prefix the vendor (`openai/gpt-4o`); the model id is the last part.
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};
        match get_tokenizer(&name) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Encoding::O200k,
            Some(Tokenizer::Cl100kBase) => Encoding::Cl100k,
            _ => Encoding::Chars,
        }
    }
}

fn bpe(encoding: Encoding) -> Option<&'static CoreBPE> {
    static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
    static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
    match encoding {
        Encoding::O200k => O200K.get_or_init(|| tiktoken_rs::o200k_base().ok()),
        Encoding::Cl100k => CL100K.get_or_init(|| tiktoken_rs::cl100k_base().ok()),
        Encoding::Chars => return None,
    }
    .as_ref()
}

/// `ceil(ASCII bytes / 4) + non-ASCII characters`.
pub fn chars_estimate(text: &str) -> usize {
    let ascii = text.bytes().filter(u8::is_ascii).count();
    let other = text.chars().filter(|c| !c.is_ascii()).count();
    ascii.div_ceil(4) + other
}

/// Counts tokens of texts, messages and tool definitions for one model.
#[derive(Debug, Clone)]
pub struct TokenCounter {
    encoding: Encoding,
    cache: HashMap<u64, usize>,
}

impl TokenCounter {
    pub fn new(encoding: Encoding) -> TokenCounter {
        TokenCounter {
            encoding,
            cache: HashMap::new(),
        }
    }

    pub fn for_model(model: &str) -> TokenCounter {
        TokenCounter::new(Encoding::for_model(model))
    }

    /// The encoding actually used (chars/4 if the BPE tables could not be loaded).
    pub fn encoding(&self) -> Encoding {
        match bpe(self.encoding) {
            Some(_) => self.encoding,
            None => Encoding::Chars,
        }
    }

    fn encode(&self, text: &str) -> usize {
        let Some(bpe) = bpe(self.encoding) else {
            return chars_estimate(text);
        };
        let mut total = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let mut cut = rest.len().min(PIECE);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            let (piece, tail) = rest.split_at(cut);
            total += bpe.encode_ordinary(piece).len();
            rest = tail;
        }
        total
    }

    pub fn text(&mut self, text: &str) -> usize {
        if text.len() < CACHE_MIN {
            return self.encode(text);
        }
        let mut h = DefaultHasher::new();
        text.hash(&mut h);
        let key = h.finish();
        if let Some(n) = self.cache.get(&key) {
            return *n;
        }
        let n = self.encode(text);
        if self.cache.len() >= CACHE_MAX_ENTRIES {
            self.cache.clear();
        }
        self.cache.insert(key, n);
        n
    }

    pub fn message(&mut self, m: &Message) -> usize {
        let mut n = MESSAGE_OVERHEAD + self.text(m.text());
        for call in &m.tool_calls {
            n += MESSAGE_OVERHEAD + self.text(&call.name) + self.text(&call.arguments);
        }
        if let Some(id) = &m.tool_call_id {
            n += self.text(id);
        }
        for value in m.extra.values() {
            n += match value {
                serde_json::Value::String(s) => self.text(s),
                other => self.text(&other.to_string()),
            };
        }
        n
    }

    pub fn messages(&mut self, messages: &[Message]) -> usize {
        messages.iter().map(|m| self.message(m)).sum()
    }

    /// The tool definitions as the provider receives them (JSON).
    pub fn tools(&mut self, tools: &[ToolDef]) -> usize {
        tools
            .iter()
            .map(|t| {
                let json = serde_json::to_string(&t.parameters).unwrap_or_default();
                MESSAGE_OVERHEAD + self.text(&t.name) + self.text(&t.description) + self.text(&json)
            })
            .sum()
    }

    /// A whole request: messages, tools and the answer primer.
    pub fn request(&mut self, messages: &[Message], tools: &[ToolDef]) -> usize {
        self.messages(messages) + self.tools(tools) + REQUEST_OVERHEAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_get_their_bpe_and_others_chars() {
        assert_eq!(Encoding::for_model("gpt-4o-mini"), Encoding::O200k);
        assert_eq!(Encoding::for_model("gpt-4.1"), Encoding::O200k);
        assert_eq!(Encoding::for_model("openai/gpt-5"), Encoding::O200k);
        assert_eq!(Encoding::for_model("o3-mini"), Encoding::O200k);
        assert_eq!(Encoding::for_model("gpt-4"), Encoding::Cl100k);
        assert_eq!(Encoding::for_model("gpt-3.5-turbo"), Encoding::Cl100k);
        assert_eq!(Encoding::for_model("qwen2.5-coder:14b"), Encoding::Chars);
        assert_eq!(Encoding::for_model("deepseek-chat"), Encoding::Chars);
        assert_eq!(Encoding::for_model(""), Encoding::Chars);
    }

    #[test]
    fn bpe_counts_are_real_and_the_chars_estimate_is_close() {
        let mut bpe = TokenCounter::new(Encoding::O200k);
        assert_eq!(bpe.encoding(), Encoding::O200k);
        // "hello world" is two tokens in o200k_base.
        assert_eq!(bpe.text("hello world"), 2);
        let text = include_str!("../prompts/base_rules.md");
        let real = bpe.text(text);
        let estimate = chars_estimate(text);
        let ratio = estimate as f64 / real as f64;
        assert!((0.9..1.25).contains(&ratio), "{estimate} vs {real}");
        assert_eq!(chars_estimate("abcd"), 1);
        assert_eq!(chars_estimate("abcde"), 2);
        assert_eq!(chars_estimate("漢字"), 2);
    }

    #[test]
    fn a_long_run_of_one_letter_is_counted_quickly_and_cached() {
        let mut bpe = TokenCounter::new(Encoding::O200k);
        let text = "a".repeat(1 << 20);
        let start = std::time::Instant::now();
        let n = bpe.text(&text);
        assert!(n > 1000, "{n}");
        assert!(start.elapsed().as_secs() < 10);
        let again = std::time::Instant::now();
        assert_eq!(bpe.text(&text), n);
        assert!(again.elapsed() < start.elapsed());
    }
}
