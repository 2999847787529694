//! `@path` in a prompt: the workspace file's content goes with the prompt. Each file is read
//! by a `read_file` call through the pipeline (the person's own call, so confinement, deny
//! rules and the protected paths hold as for any read), and what it returned is appended to
//! the prompt under the path. A word after `@` that names no file of the workspace (a
//! handle, an address) stays text and reads nothing.

use std::path::Path;

/// The paths a prompt mentions, in order, without duplicates: words `@PATH` whose PATH (with
/// closing punctuation taken off when the word as typed names nothing) is a file under
/// `root`. Nothing outside the workspace is looked at here; the read itself is confined.
pub(crate) fn mentioned(text: &str, root: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let candidates = [
            path,
            path.trim_end_matches([',', ';', ':', ')', '?', '!', '.', '"', '\'']),
        ];
        let found = candidates.into_iter().find(|p| {
            !p.is_empty()
                && !p.starts_with('/')
                && !p.split('/').any(|part| part == "..")
                && root.join(p).is_file()
        });
        if let Some(p) = found
            && !out.iter().any(|o| o == p)
        {
            out.push(p.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_words_that_name_workspace_files_are_mentions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let text = "see @src/main.rs, then @README.md. ask @alice or mail bob@x.org; @src/main.rs again @../etc/passwd @/etc/passwd @src";
        assert_eq!(mentioned(text, dir.path()), ["src/main.rs", "README.md"]);
    }
}
