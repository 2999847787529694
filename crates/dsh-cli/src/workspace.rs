//! Which workspace a recorded session is taken up in — by `dsh replay` and by a resume
//! (`--resume ID`): the one its journal records, unless `--workspace DIR` was given (a move
//! on purpose, said) or the recorded directory is gone (then the current directory, said).
//! One choice for both, so a session never changes directories silently.

use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::{Common, Failure};

/// `common` with the workspace to take a recorded session up in: `--workspace` when given
/// explicitly (with a notice when it is not the recorded one), else `recorded` if that
/// directory exists, else the current directory (with a notice). `doing` names the verb in
/// the notices ("replaying", "resuming").
pub(crate) fn for_recorded(
    common: &Common,
    recorded: Option<&Path>,
    doing: &str,
) -> Result<Common, Failure> {
    let workspace = choose(common, recorded, doing)?;
    Ok(Common {
        workspace,
        workspace_given: true,
        config: common.config.clone(),
        yolo: common.yolo,
        mode: common.mode,
        json: common.json,
        sandbox: common.sandbox,
        tools_mode: common.tools_mode,
    })
}

fn choose(common: &Common, recorded: Option<&Path>, doing: &str) -> Result<PathBuf, Failure> {
    if common.workspace_given {
        let given = &common.workspace;
        if let Some(dir) = recorded
            && dir.is_dir()
            && !same_dir(given, dir)
        {
            eprintln!(
                "dsh: {doing} in {}, not in the recorded workspace {} (--workspace moves it)",
                given.canonicalize().as_deref().unwrap_or(given).display(),
                dir.display()
            );
        }
        return Ok(given.clone());
    }
    if let Some(dir) = recorded
        && dir.is_dir()
    {
        return Ok(dir.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::harness(anyhow!("cannot read the current directory: {e}")))?;
    let why = match recorded {
        Some(dir) => format!("the recorded workspace {} does not exist", dir.display()),
        None => "the journal records no workspace".to_owned(),
    };
    eprintln!(
        "dsh: {doing} in the current directory {} because {why} (--workspace DIR chooses one)",
        cwd.display()
    );
    Ok(cwd)
}

/// Whether two paths name one directory (a path that cannot be resolved is compared as is).
fn same_dir(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canonical(a) == canonical(b)
}
