//! A `SKILL.md`'s front matter (the Agent Skills format): a YAML block between `---` lines
//! at the top of the file, of which dsh reads `name` and `description`. The subset read is
//! what skills are written in: `key: value` lines at the top level, values plain or quoted
//! ('…' or "…"), or a block scalar (`|` or `>`) on the indented lines after it; indented
//! lines under another key (`metadata:`) and other keys (`license`, `allowed-tools`) are
//! skipped. Anything else is an error naming the line.

/// What a skill's front matter says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub description: String,
    /// Where the body starts (after the closing `---` line), in bytes.
    pub body_at: usize,
}

/// The longest name (the Agent Skills format's limit).
pub const MAX_NAME: usize = 64;
/// The longest description (the format's limit).
pub const MAX_DESCRIPTION: usize = 1024;

/// Reads `text`'s front matter; `Err` says what is wrong, with the line.
pub fn parse(text: &str) -> Result<FrontMatter, String> {
    let text_start = text.strip_prefix('\u{feff}').map_or(0, |_| 3);
    let mut lines = LineIter::new(text, text_start);
    match lines.next() {
        Some((_, l)) if l.trim_end() == "---" => {}
        _ => return Err("it does not start with a `---` front matter line".to_owned()),
    }
    let mut name = None;
    let mut description = None;
    let mut body_at = None;
    let mut pending: Vec<(usize, &str)> = Vec::new();
    let mut entries: Vec<(usize, &str, &str)> = Vec::new();
    for (at, line) in lines.by_ref() {
        if line.trim_end() == "---" {
            body_at = Some(at + line.len());
            break;
        }
        pending.push((at, line));
    }
    let Some(body_at) = body_at else {
        return Err("its front matter is not closed by a `---` line".to_owned());
    };
    // Group each top-level key with its indented continuation lines.
    let mut i = 0;
    let line_no = |at: usize| text[..at].matches('\n').count() + 1;
    let mut blocks: Vec<(usize, &str, Vec<&str>)> = Vec::new();
    while i < pending.len() {
        let (at, line) = pending[i];
        i += 1;
        let content = line.trim_end_matches(['\n', '\r']);
        if content.trim().is_empty() || content.trim_start().starts_with('#') {
            continue;
        }
        if content.starts_with([' ', '\t']) {
            return Err(format!(
                "line {}: an indented line with no key above it",
                line_no(at)
            ));
        }
        let Some((key, value)) = content.split_once(':') else {
            return Err(format!("line {}: not `key: value`", line_no(at)));
        };
        let mut more = Vec::new();
        while i < pending.len() {
            let next = pending[i].1.trim_end_matches(['\n', '\r']);
            if next.starts_with([' ', '\t']) || next.trim().is_empty() {
                more.push(next);
                i += 1;
            } else {
                break;
            }
        }
        entries.push((at, key.trim(), value.trim()));
        blocks.push((at, value.trim(), more));
    }
    for ((at, key, _), (_, value, more)) in entries.iter().zip(&blocks) {
        let read =
            || value_of(value, more).map_err(|e| format!("line {}: {key}: {e}", line_no(*at)));
        match *key {
            "name" => name = Some(read()?),
            "description" => description = Some(read()?),
            _ => {}
        }
    }
    let name = name.ok_or("its front matter has no `name`")?;
    let description = description.ok_or("its front matter has no `description`")?;
    check_name(&name)?;
    if description.trim().is_empty() {
        return Err("its `description` is empty".to_owned());
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!(
            "its `description` is longer than {MAX_DESCRIPTION} characters"
        ));
    }
    Ok(FrontMatter {
        name,
        description: description.trim().to_owned(),
        body_at,
    })
}

/// A skill's name: lowercase letters, digits and `-`, at most [`MAX_NAME`].
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its name {name:?} is not 1 to {MAX_NAME} lowercase letters, digits and inner hyphens"
        ))
    }
}

/// A value: plain, quoted, or a block scalar over `more`.
fn value_of(value: &str, more: &[&str]) -> Result<String, String> {
    let block = |fold: bool| {
        let lines: Vec<&str> = more.iter().map(|l| l.trim()).collect();
        let joined = if fold {
            lines.join(" ")
        } else {
            lines.join("\n")
        };
        joined.trim().to_owned()
    };
    Ok(match value {
        "|" | "|-" | "|+" => block(false),
        ">" | ">-" | ">+" => block(true),
        v if v.starts_with('"') => {
            let inner = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .ok_or("a \"quoted\" value is not closed on its line")?;
            unescape(inner)?
        }
        v if v.starts_with('\'') => v
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .ok_or("a 'quoted' value is not closed on its line")?
            .replace("''", "'"),
        v => {
            // A plain value may go on over indented lines (folded).
            let mut s = v.to_owned();
            for l in more {
                if !l.trim().is_empty() {
                    s.push(' ');
                    s.push_str(l.trim());
                }
            }
            s
        }
    })
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some(other) => return Err(format!("the escape \\{other} is not read here")),
            None => return Err("a value ends with \\".to_owned()),
        }
    }
    Ok(out)
}

/// Lines with their byte offsets, newline included.
struct LineIter<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> LineIter<'a> {
    fn new(text: &'a str, at: usize) -> Self {
        LineIter { text, at }
    }
}

impl<'a> Iterator for LineIter<'a> {
    type Item = (usize, &'a str);
    fn next(&mut self) -> Option<(usize, &'a str)> {
        if self.at >= self.text.len() {
            return None;
        }
        let rest = &self.text[self.at..];
        let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let item = (self.at, &rest[..len]);
        self.at += len;
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formats_usual_shapes_are_read() {
        let text = "---\nname: pdf-tools\ndescription: Fill PDF forms. Use when the user mentions PDFs.\nlicense: MIT\nmetadata:\n  version: \"1.0\"\n---\n# Body\n";
        let fm = parse(text).unwrap();
        assert_eq!(fm.name, "pdf-tools");
        assert_eq!(
            fm.description,
            "Fill PDF forms. Use when the user mentions PDFs."
        );
        assert_eq!(&text[fm.body_at..], "# Body\n");

        let fm =
            parse("---\nname: 'a-b'\ndescription: >\n  folded over\n  two lines\n---\n").unwrap();
        assert_eq!(
            (fm.name.as_str(), fm.description.as_str()),
            ("a-b", "folded over two lines")
        );
        let fm =
            parse("---\r\nname: \"x\"\r\ndescription: \"say \\\"hi\\\"\"\r\n---\r\nbody").unwrap();
        assert_eq!(fm.description, "say \"hi\"");
    }

    #[test]
    fn malformed_front_matter_says_what_and_where() {
        assert!(
            parse("# no front matter")
                .unwrap_err()
                .contains("does not start")
        );
        assert!(parse("---\nname: x\n").unwrap_err().contains("not closed"));
        assert!(
            parse("---\nname: x\n---\n")
                .unwrap_err()
                .contains("no `description`")
        );
        assert!(
            parse("---\nname: X Y\ndescription: d\n---\n")
                .unwrap_err()
                .contains("not 1 to 64")
        );
        assert!(
            parse("---\nname x\n---\n")
                .unwrap_err()
                .contains("line 2: not `key: value`")
        );
        assert!(
            parse("---\nname: \"x\ndescription: d\n---\n")
                .unwrap_err()
                .contains("line 2: name")
        );
        assert!(
            parse("---\n  indented: x\n---\n")
                .unwrap_err()
                .contains("line 2")
        );
    }
}
