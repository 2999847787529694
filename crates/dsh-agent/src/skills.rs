//! Where a session's skills come from (Agent Skills: folders with a `SKILL.md`), most
//! specific first: a trusted project's `.dsh/skills/` and `.claude/skills/`, then `skills/`
//! beside the user config, then `~/.claude/skills/` with `[compat] claude = true`. An
//! untrusted project's skills are ignored with the notice (what the model is told is the
//! project's to choose only once trusted — DESIGN §5); a skill whose `SKILL.md` cannot be read
//! is left out with a one-line warning.

use std::collections::BTreeMap;

use dsh_config::Loaded;
use dsh_tools::skill::{Catalog, SkillSource};

/// The project's skill directories, relative to the workspace.
const PROJECT_DIRS: [&str; 2] = [".dsh/skills", ".claude/skills"];

/// The skills of `loaded`'s session.
pub(crate) fn catalog(
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
    notices: &mut Vec<String>,
) -> Catalog {
    let mut sources = Vec::new();
    for dir in PROJECT_DIRS {
        let path = loaded.workspace.join(dir);
        if !path.is_dir() {
            continue;
        }
        if loaded.trusted {
            sources.push(SkillSource {
                dir: path,
                label: format!("project {dir}"),
            });
        } else {
            notices.push(format!(
                "{}: ignored skills: this workspace is not trusted (run `dsh trust` to trust it)",
                path.display()
            ));
        }
    }
    if let Some(user) = loaded.user_config.as_deref().and_then(|p| p.parent()) {
        sources.push(SkillSource {
            dir: user.join("skills"),
            label: "user".to_owned(),
        });
    }
    if loaded.config.compat.claude
        && let Some(dir) = dsh_config::claude_config_dir(env)
    {
        sources.push(SkillSource {
            dir: dir.join("skills"),
            label: "user ~/.claude/skills".to_owned(),
        });
    }
    // A directory named twice (dsh run in the home directory) is read once.
    let mut seen = Vec::new();
    sources.retain(|s| {
        let real = std::fs::canonicalize(&s.dir).unwrap_or_else(|_| s.dir.clone());
        let new = !seen.contains(&real);
        seen.push(real);
        new
    });
    let catalog = Catalog::scan(&sources);
    notices.extend(catalog.warnings.iter().cloned());
    catalog
}
