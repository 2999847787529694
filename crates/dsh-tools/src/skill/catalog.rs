//! Finding skills: each folder under a skills directory that holds a `SKILL.md` with valid
//! front matter is one skill. A folder whose `SKILL.md` cannot be read is left out with a
//! one-line warning naming the file; a name found twice keeps the first source's skill (the
//! sources come most specific first: the project's before the user's).

use std::path::{Path, PathBuf};

use super::front_matter;

/// The largest `SKILL.md` read.
pub const MAX_SKILL_MD: u64 = 256 * 1024;

/// A directory of skill folders, and what to call it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillSource {
    pub dir: PathBuf,
    /// `project .dsh/skills`, `user`, …
    pub label: String,
}

/// One skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its folder, symlinks resolved: what it may read is confined to it.
    pub dir: PathBuf,
    /// The source's label.
    pub source: String,
}

/// The skills of a session.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    skills: Vec<Skill>,
    /// One line per skill left out.
    pub warnings: Vec<String>,
}

impl Catalog {
    /// The skills under `sources`, in name order.
    pub fn scan(sources: &[SkillSource]) -> Catalog {
        let mut c = Catalog::default();
        for source in sources {
            let Ok(entries) = std::fs::read_dir(&source.dir) else {
                continue;
            };
            let mut folders: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            folders.sort();
            for folder in folders {
                let file = folder.join("SKILL.md");
                if !file.exists() {
                    continue;
                }
                match read_skill(&folder, &file, &source.label) {
                    Ok(skill) => {
                        if let Some(first) = c.skills.iter().find(|s| s.name == skill.name) {
                            c.warnings.push(format!(
                                "{}: skill {:?} left out: the {} skill of that name is used",
                                file.display(),
                                skill.name,
                                first.source
                            ));
                        } else {
                            c.skills.push(skill);
                        }
                    }
                    Err(why) => c
                        .warnings
                        .push(format!("{}: skill left out: {why}", file.display())),
                }
            }
        }
        c.skills.sort_by(|a, b| a.name.cmp(&b.name));
        c
    }

    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }
}

fn read_skill(folder: &Path, file: &Path, source: &str) -> Result<Skill, String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("it is not a file".to_owned());
    }
    if meta.len() > MAX_SKILL_MD {
        return Err(format!("it is larger than {} KiB", MAX_SKILL_MD / 1024));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it: {e}"))?;
    let fm = front_matter::parse(&text)?;
    let dir =
        std::fs::canonicalize(folder).map_err(|e| format!("cannot resolve its folder: {e}"))?;
    Ok(Skill {
        name: fm.name,
        description: fm.description,
        dir,
        source: source.to_owned(),
    })
}
