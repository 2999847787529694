//! Imports: what a module name binds, whether the module is refused, shadowed by a local
//! file, opaque (compiled beside the source) or a local module audited as part of the script.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dsh_core::{quote_capped, quote_capped_path};
use tree_sitter::Node;

use super::syntax::{field_text, text};
use super::writes::Summary;
use super::{Auditor, MAX_LOCAL_DEPTH, Refusal, audit_file_at, lists};

impl Auditor<'_> {
    pub(super) fn import(&mut self, node: Node, src: &[u8]) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        self.statement = node.start_byte();
        let mut cursor = node.walk();
        for name in node.children_by_field_name("name", &mut cursor) {
            let (dotted, alias) = match name.kind() {
                "aliased_import" => (
                    field_text(name, "name", src),
                    Some(field_text(name, "alias", src)),
                ),
                _ => (text(name, src), None),
            };
            self.module(&dotted, line)?;
            match alias {
                Some(a) => {
                    self.modules.insert(a.clone());
                    self.bind(a, dotted);
                }
                None => {
                    let top = dotted.split('.').next().unwrap_or_default().to_owned();
                    self.modules.insert(top.clone());
                    self.bind(top.clone(), top);
                }
            }
        }
        Ok(())
    }

    pub(super) fn import_from(&mut self, node: Node, src: &[u8]) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        self.statement = node.start_byte();
        let Some(module) = node.child_by_field_name("module_name") else {
            return Err(Refusal::at(line, "an import the audit cannot read"));
        };
        if module.kind() == "relative_import" {
            return Err(Refusal::at(
                line,
                format!(
                    "{} is a relative import of a local module, which the audit does not follow",
                    quote_capped(&text(node, src))
                ),
            ));
        }
        let module = text(module, src);
        self.module(&module, line)?;
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        if children.iter().any(|c| c.kind() == "wildcard_import")
            && !lists::SAFE_STAR.contains(&module.as_str())
        {
            return Err(Refusal::at(
                line,
                format!(
                    "{} binds names the audit cannot see; import them by name",
                    quote_capped(&format!("from {module} import *"))
                ),
            ));
        }
        let mut cursor = node.walk();
        for name in node.children_by_field_name("name", &mut cursor) {
            let (imported, alias) = match name.kind() {
                "aliased_import" => (
                    field_text(name, "name", src),
                    field_text(name, "alias", src),
                ),
                _ => (text(name, src), text(name, src)),
            };
            let full = format!("{module}.{imported}");
            if lists::module_denied(&full) || lists::attr_denied(&module, &imported) {
                return Err(Refusal::at(
                    line,
                    format!(
                        "{full} is refused (imported as {alias})",
                        full = quote_capped(&full),
                        alias = quote_capped(&alias)
                    ),
                ));
            }
            // `re.compile` is re's own; a bare `compile` stays refused wherever it is used.
            let own = module == "re" && imported == "compile";
            if lists::name_denied_anywhere(&imported)
                || (lists::DENIED_BUILTINS.contains(&imported.as_str()) && !own)
            {
                return Err(Refusal::at(
                    line,
                    format!("importing {full} is refused", full = quote_capped(&full)),
                ));
            }
            self.bind(alias, full);
        }
        Ok(())
    }

    fn bind(&mut self, name: String, target: String) {
        self.aliases.entry(name).or_default().push(target);
    }

    /// An imported module: refused, a shadowing local file, or a local module to audit.
    fn module(&mut self, dotted: &str, line: usize) -> Result<(), Refusal> {
        if lists::module_denied(dotted) {
            return Err(Refusal::at(
                line,
                format!(
                    "importing the module {dotted} is refused",
                    dotted = quote_capped(dotted)
                ),
            ));
        }
        let top = dotted.split('.').next().unwrap_or_default();
        for dir in self.dirs {
            // A compiled or native module (`top.pyc`, `top.cpython-312-x86_64-linux-gnu.so`)
            // is found before or instead of `top.py`, and the audit cannot read it.
            if let Some(opaque) = compiled_sibling(dir, top) {
                return Err(Refusal::at(
                    line,
                    format!(
                        "{top} may be loaded from {}, which the audit cannot read",
                        quote_capped_path(&opaque),
                        top = quote_capped(top)
                    ),
                ));
            }
            let file = dir.join(format!("{top}.py"));
            let package = dir.join(top);
            let local = if file.exists() {
                Some(file)
            } else if package.exists() {
                Some(package)
            } else {
                None
            };
            let Some(local) = local else { continue };
            if lists::STDLIB.contains(&top) {
                return Err(Refusal::at(
                    line,
                    format!(
                        "the local {} shadows the standard module {top}; it is refused",
                        quote_capped_path(&local),
                        top = quote_capped(top)
                    ),
                ));
            }
            if local.is_dir() {
                return Err(Refusal::at(
                    line,
                    format!(
                        "{top} is a local package ({}), which the audit does not follow",
                        local.display(),
                        top = quote_capped(top)
                    ),
                ));
            }
            self.local(&local, top, line)?;
            self.local_found.insert(top.to_owned());
        }
        Ok(())
    }

    /// Audits a local module the script imports, as part of the script.
    fn local(&mut self, file: &Path, top: &str, line: usize) -> Result<(), Refusal> {
        let Some(ws) = self.ws else {
            return Err(Refusal::at(
                line,
                format!(
                    "{top} is a local module, which cannot be audited here",
                    top = quote_capped(top)
                ),
            ));
        };
        if self.shared.seen.contains(file) {
            let summary = self
                .shared
                .summaries
                .get(file)
                .cloned()
                .unwrap_or_else(|| Summary::unknown(top));
            self.locals
                .entry(self.statement)
                .or_default()
                .push((top.to_owned(), summary));
            return Ok(());
        }
        if self.depth >= MAX_LOCAL_DEPTH {
            return Err(Refusal::at(
                line,
                format!(
                    "{top}: local modules import each other too deeply to follow",
                    top = quote_capped(top)
                ),
            ));
        }
        let given = file.to_string_lossy().into_owned();
        let audited = audit_file_at(ws, &given, self.dirs, self.depth + 1, self.shared);
        if let Ok(file) = &audited {
            let summary = self
                .shared
                .summaries
                .get(&file.abs)
                .cloned()
                .unwrap_or_else(|| Summary::unknown(top));
            self.locals
                .entry(self.statement)
                .or_default()
                .push((top.to_owned(), summary));
        }
        audited.map(|_| ()).map_err(|r| {
            Refusal::at(
                line,
                format!(
                    "the local module {top} ({}) is refused: {r}",
                    file.display(),
                    top = quote_capped(top)
                ),
            )
        })
    }
}

/// A compiled or native module file for `top` in `dir` (`top.pyc`, `top.*.so`, …).
fn compiled_sibling(dir: &Path, top: &str) -> Option<PathBuf> {
    let prefix = format!("{top}.");
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| {
            let ext = n.rsplit('.').next().unwrap_or_default();
            n.starts_with(&prefix)
                && matches!(
                    ext,
                    "pyc" | "pyo" | "so" | "pyd" | "dll" | "pyw" | "zip" | "egg"
                )
        })
        .map(|n| dir.join(n))
}

/// The dotted names an attribute chain (`o.path.join`) may stand for through the imports;
/// empty when its first name is not bound by an import.
pub(super) fn resolve(aliases: &HashMap<String, Vec<String>>, chain: &[String]) -> Vec<String> {
    let Some(first) = chain.first() else {
        return Vec::new();
    };
    aliases
        .get(first)
        .into_iter()
        .flatten()
        .map(|target| {
            std::iter::once(target.as_str())
                .chain(chain[1..].iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect()
}
