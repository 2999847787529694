//! A temporary world: workspace, user config dir, managed file, `DSH_HOME` — never the
//! real HOME or `/etc`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dsh_config::{ConfigError, LoadOptions, Loaded, load};

pub struct World {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub config_home: PathBuf,
    pub managed: PathBuf,
    pub env: BTreeMap<String, String>,
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        let config_home = dir.path().join("config-home");
        let dsh_home = dir.path().join("dsh-home");
        std::fs::create_dir_all(&workspace).unwrap();
        let mut env = BTreeMap::new();
        env.insert(
            "DSH_CONFIG_HOME".to_string(),
            config_home.display().to_string(),
        );
        env.insert("DSH_HOME".to_string(), dsh_home.display().to_string());
        World {
            managed: dir.path().join("etc/managed.toml"),
            dir,
            workspace,
            config_home,
            env,
        }
    }

    pub fn user_path(&self) -> PathBuf {
        self.config_home.join("config.toml")
    }

    pub fn project_path(&self) -> PathBuf {
        self.workspace.join(".dsh/config.toml")
    }

    pub fn write(&self, path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.to_path_buf()
    }

    pub fn user(&self, text: &str) -> PathBuf {
        self.write(&self.user_path(), text)
    }

    pub fn project(&self, text: &str) -> PathBuf {
        self.write(&self.project_path(), text)
    }

    pub fn managed(&self, text: &str) -> PathBuf {
        self.write(&self.managed, text)
    }

    /// Trusts the workspace the way `dsh trust` does.
    pub fn trust(&self) {
        dsh_config::record_trust(&self.user_path(), &self.workspace).unwrap();
    }

    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            workspace: self.workspace.clone(),
            user_config: None,
            managed: Some(self.managed.clone()),
            env: self.env.clone(),
            overrides: Default::default(),
        }
    }

    pub fn try_load(&self) -> Result<Loaded, ConfigError> {
        load(&self.options())
    }

    pub fn load(&self) -> Loaded {
        self.try_load().unwrap()
    }

    pub fn error(&self) -> String {
        self.try_load().unwrap_err().to_string()
    }
}

pub fn rules(list: &[dsh_config::Rule]) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

pub fn patterns(list: &[dsh_config::Sourced<String>]) -> Vec<String> {
    list.iter().map(|s| s.value.clone()).collect()
}
