//! Reading a configuration file's text, safely: a regular file of at most 1 MiB, UTF-8.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use crate::error::{ConfigError, ErrorKind, line_of};

/// Config files larger than this are refused (a repository could point
/// `.dsh/config.toml` at something huge).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads a config file. `Ok(None)` when it does not exist; an error when it exists
/// but is not a regular file, is too large, unreadable or not UTF-8.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ConfigError::io(path, "cannot open", &e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| ConfigError::io(path, "cannot read", &e))?;
    if !meta.is_file() {
        return Err(ConfigError::new(ErrorKind::Io, "not a regular file").in_file(path));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ConfigError::io(path, "cannot read", &e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(
            ConfigError::new(ErrorKind::Io, format!("larger than {MAX_FILE_BYTES} bytes"))
                .in_file(path),
        );
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let line = line_of(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        );
        ConfigError::new(ErrorKind::Io, "not valid UTF-8")
            .in_file(path)
            .at_line(Some(line))
    })
}

/// Reads a JSON file another harness writes (`.mcp.json`, `.claude/settings.json`) as a `T`:
/// `Ok(None)` when it does not exist; its text beside the value, for the lines of its keys;
/// an error naming the file, the line and `shape` (what the file should hold) when it is
/// not such JSON. A file read is pushed on `files`.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    shape: &str,
    files: &mut Vec<std::path::PathBuf>,
) -> Result<Option<(T, String)>, ConfigError> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    files.push(path.to_path_buf());
    let value = serde_json::from_str(&text).map_err(|e| {
        ConfigError::new(ErrorKind::Syntax, format!("not {shape}: {e}"))
            .in_file(path)
            .at_line(Some(e.line()))
    })?;
    Ok(Some((value, text)))
}
