//! Where a setting came from: its [`Layer`], file, line and key ([`Origin`]). Configuration
//! tags every list entry with one, and a [`Rule`](crate::Rule) carries its own to the policy
//! that judges it, so an explanation can name the file and line, and so a rule from an
//! untrusted project can be held to tightening.

use std::fmt;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

/// Where a setting came from, lowest to highest precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Built into dsh.
    Default,
    /// The managed file (`/etc/dsh/managed.toml`): its denials, protected paths,
    /// `sandbox.mode = "required"`, `sandbox.allow_network = false` and limits (as
    /// ceilings) cannot be loosened by any other layer.
    Managed,
    /// The user's own config file.
    User,
    /// `<workspace>/.dsh/config.toml` of a workspace the user trusts.
    Project,
    /// `<workspace>/.dsh/config.toml` of a workspace the user has not trusted. Only
    /// tightening settings survive from it (deny/ask rules, protected paths, lower
    /// limits). **A policy must never let an entry from this layer loosen a verdict**:
    /// e.g. an `ask` rule from here matching a shell command the default lists refuse
    /// must not turn that refusal into an ask — combine it as the stricter of the two.
    UntrustedProject,
    /// Environment variables (`DSH_MODEL`, `DSH_PROVIDER`, `OPENAI_BASE_URL`, …).
    Env,
    /// Command-line flags (dsh-config's `Overrides`).
    Flag,
}

impl Layer {
    /// A short human name: `built-in default`, `managed`, `user`, `project`,
    /// `untrusted project`, `environment`, `flag`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Default => "built-in default",
            Layer::Managed => "managed",
            Layer::User => "user",
            Layer::Project => "project",
            Layer::UntrustedProject => "untrusted project",
            Layer::Env => "environment",
            Layer::Flag => "flag",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The origin of one list entry: which layer, which file and line. Its `Display` reads
/// `project /w/.dsh/config.toml:12` or `built-in default`, so a policy can explain
/// "deny read_file(.env) from project /w/.dsh/config.toml:12".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The layer.
    pub layer: Layer,
    /// The file, for file layers.
    #[serde(serialize_with = "lossy_path")]
    pub path: Option<PathBuf>,
    /// The 1-based line in `path`, when known.
    pub line: Option<usize>,
    /// The dotted key in `path`, e.g. `permissions.deny[2]`, when known.
    pub key: Option<String>,
}

impl Origin {
    /// The origin of built-in defaults.
    pub fn builtin() -> Self {
        Origin {
            layer: Layer::Default,
            path: None,
            line: None,
            key: None,
        }
    }

    /// Where to point an error at the entry: `/w/.dsh/config.toml:12: permissions.deny[2]`
    /// (the shape of dsh-config's `ConfigError` messages), or the layer's name.
    pub fn location(&self) -> String {
        let mut out = match &self.path {
            Some(path) => path.display().to_string(),
            None => self.layer.as_str().to_string(),
        };
        if let (Some(_), Some(line)) = (&self.path, self.line) {
            out.push_str(&format!(":{line}"));
        }
        if let Some(key) = &self.key {
            out.push_str(&format!(": {key}"));
        }
        out
    }

    /// True when the entry may only tighten a verdict (it comes from an untrusted project).
    pub fn tighten_only(&self) -> bool {
        self.layer == Layer::UntrustedProject
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.layer.as_str())?;
        if let Some(path) = &self.path {
            write!(f, " {}", path.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
        }
        Ok(())
    }
}

fn lossy_path<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => s.serialize_some(&p.to_string_lossy()),
        None => s.serialize_none(),
    }
}
