//! Maps a JSON pointer back to a line of the JSON text, so schema errors point at a line the
//! author can jump to. Works on text that already parsed as JSON; returns `None` otherwise.

/// 1-based line of the value (or of its key, for object members) named by `pointer`.
pub fn line_of_pointer(text: &str, pointer: &str) -> Option<u32> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, 0);
    let mut anchor = pos;
    if !pointer.is_empty() {
        for raw in pointer.strip_prefix('/')?.split('/') {
            let token = raw.replace("~1", "/").replace("~0", "~");
            match bytes.get(pos)? {
                b'{' => {
                    let (key_pos, value_pos) = find_member(bytes, pos, &token)?;
                    anchor = key_pos;
                    pos = value_pos;
                }
                b'[' => {
                    let index: usize = token.parse().ok()?;
                    pos = find_item(bytes, pos, index)?;
                    anchor = pos;
                }
                _ => return None,
            }
        }
    }
    let line = bytes[..anchor].iter().filter(|b| **b == b'\n').count() + 1;
    u32::try_from(line).ok()
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Returns the index just past a string starting at `i` (which must be `"`).
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            Some(j)
        }
    }
}

fn decode_key(b: &[u8], start: usize, end: usize) -> Option<String> {
    serde_json::from_slice::<String>(b.get(start..end)?).ok()
}

/// Finds member `key` of the object at `i`: (position of the key, position of its value).
fn find_member(b: &[u8], i: usize, key: &str) -> Option<(usize, usize)> {
    let mut j = skip_ws(b, i + 1);
    while b.get(j)? != &b'}' {
        let key_start = j;
        let key_end = skip_string(b, j)?;
        let name = decode_key(b, key_start, key_end)?;
        j = skip_ws(b, key_end);
        if b.get(j)? != &b':' {
            return None;
        }
        let value_start = skip_ws(b, j + 1);
        if name == key {
            return Some((key_start, value_start));
        }
        j = skip_ws(b, skip_value(b, value_start)?);
        if b.get(j)? == &b',' {
            j = skip_ws(b, j + 1);
        }
    }
    None
}

fn find_item(b: &[u8], i: usize, index: usize) -> Option<usize> {
    let mut j = skip_ws(b, i + 1);
    let mut n = 0;
    while b.get(j)? != &b']' {
        if n == index {
            return Some(j);
        }
        j = skip_ws(b, skip_value(b, j)?);
        if b.get(j)? == &b',' {
            j = skip_ws(b, j + 1);
        }
        n += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "{\n  \"a\": 1,\n  \"nodes\": [\n    {\"id\": \"x\"},\n    {\n      \"id\": \"y\",\n      \"t/k\": \"z\"\n    }\n  ]\n}\n";

    #[test]
    fn locates_members_and_items() {
        assert_eq!(line_of_pointer(DOC, ""), Some(1));
        assert_eq!(line_of_pointer(DOC, "/a"), Some(2));
        assert_eq!(line_of_pointer(DOC, "/nodes"), Some(3));
        assert_eq!(line_of_pointer(DOC, "/nodes/0"), Some(4));
        assert_eq!(line_of_pointer(DOC, "/nodes/1/id"), Some(6));
        assert_eq!(line_of_pointer(DOC, "/nodes/1/t~1k"), Some(7));
    }

    #[test]
    fn unknown_paths_give_none() {
        assert_eq!(line_of_pointer(DOC, "/missing"), None);
        assert_eq!(line_of_pointer(DOC, "/nodes/9"), None);
        assert_eq!(line_of_pointer("not json", "/a"), None);
    }
}
