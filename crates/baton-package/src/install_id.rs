//! Install ids: `<name>@<version>-<sha8>`, one directory name under `$BATON_HOME/packages/`.
//!
//! The name part is readable ASCII: Latin accents are transliterated from a fixed table (fixed,
//! so an id never changes with a dependency update), anything else is percent-encoded. It never
//! starts with `-` or `.` (no option look-alike, no hidden directory) and holds no separator or
//! space. ASCII names map exactly as they always have, so installed packages keep their ids.

/// Longest directory name most file systems accept, in bytes.
const MAX_ID_BYTES: usize = 255;
/// Used when nothing of the name survives.
const FALLBACK_NAME: &str = "package";

/// The install id of package `name`/`version` whose content digest is `sha256` (hex).
pub fn install_id(name: &str, version: &str, sha256: &str) -> String {
    let sha8 = sha256.get(..8).unwrap_or(sha256);
    // The schema limits versions to SemVer characters, all safe in a file name; only their
    // length needs a bound.
    let version = version.get(..MAX_ID_BYTES / 2).unwrap_or(version);
    let budget = MAX_ID_BYTES.saturating_sub(version.len() + sha8.len() + 2);
    format!("{}@{version}-{sha8}", name_part(name, budget))
}

/// The name part of an install id, at most `budget` bytes, cut between characters only.
pub fn name_part(name: &str, budget: usize) -> String {
    let mut out = String::new();
    let mut buf = [0u8; 4];
    for c in name.chars() {
        let piece: &str = if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            c.encode_utf8(&mut buf)
        } else if c.is_ascii() || c.is_whitespace() {
            "-"
        } else if is_combining_mark(c) {
            // Decomposed accents (`e` + U+0301) read like the precomposed letter.
            ""
        } else if let Some(ascii) = transliterate(c) {
            ascii
        } else {
            &percent_encode(c)
        };
        // Leading dashes and dots are dropped rather than escaped: `-rf` reads best as `rf`.
        let piece = if out.is_empty() {
            piece.trim_start_matches(['-', '.'])
        } else {
            piece
        };
        if out.len() + piece.len() > budget {
            break;
        }
        out.push_str(piece);
    }
    if out.is_empty() {
        FALLBACK_NAME.to_string()
    } else {
        out
    }
}

fn percent_encode(c: char) -> String {
    let mut buf = [0u8; 4];
    c.encode_utf8(&mut buf)
        .bytes()
        .map(|b| format!("%{b:02X}"))
        .collect()
}

/// Combining diacritical marks (U+0300..U+036F).
fn is_combining_mark(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

/// ASCII spelling of the Latin letters of Latin-1 and Latin Extended-A, plus Romanian Ș/Ț.
fn transliterate(c: char) -> Option<&'static str> {
    Some(match c {
        'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' | 'Ā' | 'Ă' | 'Ą' => "A",
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => "a",
        'Æ' => "AE",
        'æ' => "ae",
        'Ç' | 'Ć' | 'Ĉ' | 'Ċ' | 'Č' => "C",
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => "c",
        'Ð' | 'Ď' | 'Đ' => "D",
        'ð' | 'ď' | 'đ' => "d",
        'È' | 'É' | 'Ê' | 'Ë' | 'Ē' | 'Ĕ' | 'Ė' | 'Ę' | 'Ě' => "E",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => "e",
        'Ĝ' | 'Ğ' | 'Ġ' | 'Ģ' => "G",
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => "g",
        'Ĥ' | 'Ħ' => "H",
        'ĥ' | 'ħ' => "h",
        'Ì' | 'Í' | 'Î' | 'Ï' | 'Ĩ' | 'Ī' | 'Ĭ' | 'Į' | 'İ' => "I",
        'ì' | 'í' | 'î' | 'ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => "i",
        'Ĳ' => "IJ",
        'ĳ' => "ij",
        'Ĵ' => "J",
        'ĵ' => "j",
        'Ķ' => "K",
        'ķ' | 'ĸ' => "k",
        'Ĺ' | 'Ļ' | 'Ľ' | 'Ŀ' | 'Ł' => "L",
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => "l",
        'Ñ' | 'Ń' | 'Ņ' | 'Ň' | 'Ŋ' => "N",
        'ñ' | 'ń' | 'ņ' | 'ň' | 'ŉ' | 'ŋ' => "n",
        'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' | 'Ō' | 'Ŏ' | 'Ő' => "O",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => "o",
        'Œ' => "OE",
        'œ' => "oe",
        'Ŕ' | 'Ŗ' | 'Ř' => "R",
        'ŕ' | 'ŗ' | 'ř' => "r",
        'Ś' | 'Ŝ' | 'Ş' | 'Š' | 'Ș' => "S",
        'ś' | 'ŝ' | 'ş' | 'š' | 'ș' | 'ſ' => "s",
        'ß' => "ss",
        'Ţ' | 'Ť' | 'Ŧ' | 'Ț' => "T",
        'ţ' | 'ť' | 'ŧ' | 'ț' => "t",
        'Þ' => "TH",
        'þ' => "th",
        'Ù' | 'Ú' | 'Û' | 'Ü' | 'Ũ' | 'Ū' | 'Ŭ' | 'Ů' | 'Ű' | 'Ų' => "U",
        'ù' | 'ú' | 'û' | 'ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => "u",
        'Ŵ' => "W",
        'ŵ' => "w",
        'Ý' | 'Ÿ' | 'Ŷ' => "Y",
        'ý' | 'ÿ' | 'ŷ' => "y",
        'Ź' | 'Ż' | 'Ž' => "Z",
        'ź' | 'ż' | 'ž' => "z",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef";

    #[test]
    fn ascii_names_map_as_before() {
        for name in ["create-story-micro", "My Pkg", "x@y:z/w", "a.b_c", "A1"] {
            let before = crate::paths::slug(name, "._-");
            assert_eq!(
                install_id(name, "1.0.0", SHA),
                format!("{before}@1.0.0-01234567")
            );
        }
    }

    #[test]
    fn ids_are_safe_directory_names() {
        for name in ["-", ".", "..", "-.-", "", " ", "\u{3000}", "/", "\u{301}"] {
            assert_eq!(name_part(name, 100), FALLBACK_NAME, "{name:?}");
        }
        let id = install_id("x", &"1".repeat(400), SHA);
        assert!(id.len() <= MAX_ID_BYTES, "{}", id.len());
        assert!(id.starts_with("x@111"));
        assert_eq!(name_part("ab故", 5), "ab", "a percent escape is never cut");
    }
}
