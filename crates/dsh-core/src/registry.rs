//! The tool registry: what the model may call, with compiled schemas (SPEC P9).

use std::collections::BTreeMap;
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

use crate::tool::{Tool, ToolSpec};

/// Why a tool could not be registered or removed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegisterError {
    #[error("tool `{0}` declares no output schema; every tool must declare one (SPEC P9)")]
    MissingOutputSchema(String),
    #[error("tool `{tool}` has an unusable {which} schema: {reason}")]
    BadSchema {
        tool: String,
        which: &'static str,
        reason: String,
    },
    #[error("tool name `{0}` is not allowed: use 1 to 64 of A-Z a-z 0-9 _ -")]
    BadName(String),
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    #[error("tool `{0}` is reserved and cannot be removed")]
    Reserved(String),
    #[error("no tool named `{0}` is registered")]
    Unknown(String),
}

pub(crate) struct Entry {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) spec: Arc<ToolSpec>,
    input: Validator,
    output: Validator,
}

impl Entry {
    /// `Err` names the first mismatch, as the model should read it.
    pub(crate) fn check_input(&self, args: &Value) -> Result<(), String> {
        describe(&self.input, args, Quote::Value)
    }

    /// The mismatch is named without quoting the value: the output is withheld, and its text
    /// could carry a secret in a form redaction does not recognise (JSON-escaped, `\nghp_…`).
    pub(crate) fn check_output(&self, value: &Value) -> Result<(), String> {
        describe(&self.output, value, Quote::Masked)
    }
}

/// Whether a mismatch's description quotes the offending value.
#[derive(Clone, Copy)]
enum Quote {
    Value,
    Masked,
}

fn describe(validator: &Validator, value: &Value, quote: Quote) -> Result<(), String> {
    match validator.validate(value) {
        Ok(()) => Ok(()),
        Err(e) => {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            match quote {
                Quote::Value => Err(format!("at {at}: {e}")),
                Quote::Masked => Err(format!("at {at}: {}", e.masked_with("the value"))),
            }
        }
    }
}

/// The tools of a session, by name.
#[derive(Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<Entry>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers a tool. Refuses a tool without an output schema, or with a schema that accepts
    /// anything (`{}` or `true` declares nothing), or that does not compile.
    pub fn register(&mut self, tool: impl Tool) -> Result<(), RegisterError> {
        self.register_arc(Arc::new(tool))
    }

    /// [`Registry::register`] for a tool already shared.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegisterError> {
        let spec = tool.spec();
        let name = spec.name.clone();
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(RegisterError::BadName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegisterError::Duplicate(name));
        }
        let Some(output_schema) = spec.output_schema.as_ref() else {
            return Err(RegisterError::MissingOutputSchema(name));
        };
        let output = compile(&name, "output", output_schema)?;
        let input = compile(&name, "input", &spec.input_schema)?;
        self.tools.insert(
            name,
            Arc::new(Entry {
                tool,
                spec: Arc::new(spec),
                input,
                output,
            }),
        );
        Ok(())
    }

    /// Replaces the registered tool of the same name (its declaration changed, as an MCP
    /// server's may). A reserved tool cannot be replaced; when the new one is refused the old
    /// one stays.
    pub fn replace_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegisterError> {
        let name = tool.spec().name;
        match self.tools.get(&name) {
            None => return Err(RegisterError::Unknown(name)),
            Some(e) if e.spec.reserved => return Err(RegisterError::Reserved(name)),
            Some(_) => {}
        }
        let old = self.tools.remove(&name);
        if let Err(e) = self.register_arc(tool) {
            if let Some(old) = old {
                self.tools.insert(name, old);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Removes a tool; reserved tools cannot be removed (SPEC P11).
    pub fn remove(&mut self, name: &str) -> Result<(), RegisterError> {
        match self.tools.get(name) {
            None => Err(RegisterError::Unknown(name.to_owned())),
            Some(e) if e.spec.reserved => Err(RegisterError::Reserved(name.to_owned())),
            Some(_) => {
                self.tools.remove(name);
                Ok(())
            }
        }
    }

    /// The declarations of every tool, by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|e| e.spec.as_ref())
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name).map(|e| e.spec.as_ref())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub(crate) fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.tools.get(name).cloned()
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.tools.values()
    }
}

fn compile(tool: &str, which: &'static str, schema: &Value) -> Result<Validator, RegisterError> {
    let bad = |reason: &str| RegisterError::BadSchema {
        tool: tool.to_owned(),
        which,
        reason: reason.to_owned(),
    };
    match schema {
        Value::Object(map) if map.is_empty() => {
            return Err(bad("an empty schema accepts anything and declares nothing"));
        }
        Value::Object(_) => {}
        _ => return Err(bad("a schema must be a JSON object")),
    }
    jsonschema::validator_for(schema).map_err(|e| bad(&e.to_string()))
}
