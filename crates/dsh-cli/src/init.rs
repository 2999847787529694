//! `dsh init`: writes a commented `.dsh/config.toml` for the workspace (dsh-config's
//! `init` detects the project and writes the text; no model is asked). An existing file is
//! overwritten only when a person at a terminal says yes; with no terminal to ask, dsh
//! refuses, says so and exits 2. `--print` writes the text to stdout instead.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::anyhow;

use crate::{Common, Failure, exit};

pub(crate) fn init(common: &Common, print: bool) -> Result<u8, Failure> {
    let root = common.workspace.canonicalize().map_err(|e| {
        Failure::usage(anyhow!("the workspace {}: {e}", common.workspace.display()))
    })?;
    let found = dsh_config::init::detect(&root);
    let project = root.file_name().map_or_else(
        || root.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let text = dsh_config::init::template(&project, &found);
    if print {
        print!("{text}");
        return Ok(exit::OK);
    }
    let dir = root.join(".dsh");
    let path = dir.join("config.toml");
    if path.exists() {
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if !terminal {
            return Err(Failure::usage(anyhow!(
                "{} exists and there is no terminal to ask whether to replace it: nothing was written (`dsh init --print` shows what would be)",
                path.display()
            )));
        }
        eprint!("{} exists: replace it? [y/N] ", path.display());
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| Failure::usage(anyhow!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("dsh: left {} as it was", path.display());
            return Ok(exit::USAGE);
        }
    }
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, &text))
        .map_err(|e| Failure::usage(anyhow!("cannot write {}: {e}", path.display())))?;
    let found_text = if found.is_empty() {
        "no build system recognised".to_owned()
    } else {
        let names: Vec<String> = found
            .iter()
            .map(|e| format!("{} ({})", e.name, e.marker))
            .collect();
        format!("found {}", names.join(", "))
    };
    println!("wrote {} — {found_text}", path.display());
    if let Some(test) = found.iter().find_map(|e| e.test.as_ref()) {
        println!("  [verify] command = {test:?}");
    }
    let rules: usize = found.iter().map(|e| e.allow.len()).sum();
    if rules > 0 {
        println!("  {rules} allow rules suggested, commented out: uncomment those you accept");
    }
    println!(
        "  it applies in full once you trust this workspace: `dsh trust --workspace {}`",
        root.display()
    );
    Ok(exit::OK)
}
