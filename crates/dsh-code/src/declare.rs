//! TypeScript declarations of the tools a program may call, generated from each tool's input
//! and output JSON Schemas (descriptions as doc comments), for the system prompt in the
//! `code` and `both` tools modes. The model reads them; nothing executes them.
//!
//! The schema subset mapped: `type` (one or a list), `enum`, `const`, `anyOf`/`oneOf`,
//! `items`, `properties` with `required`, `additionalProperties` (an index signature when it
//! is a schema); anything else is `unknown`.

use std::fmt::Write;

use dsh_core::ToolSpec;
use serde_json::Value;

/// The declarations for `specs`, in their order: the `tools` object, `console` and the
/// error a failed call throws.
pub fn declarations<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> String {
    let mut out = String::from(PRELUDE);
    out.push_str("declare const tools: {\n");
    for spec in specs {
        doc(&mut out, &spec.description, 1);
        let input = ts_type(&spec.input_schema, 1);
        let output = spec
            .output_schema
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |s| ts_type(s, 1));
        // An object result also carries its text (see `ToolText`).
        let output = if output.starts_with('{') && !output.contains("\n    content") {
            format!("{output} & ToolText")
        } else {
            output
        };
        let _ = writeln!(
            out,
            "  {}(args: {input}): Promise<{output}>;",
            ident(&spec.name)
        );
    }
    out.push_str("};\n");
    out
}

const PRELUDE: &str = "\
/** Thrown by a `tools.*` call that did not succeed: refused by a policy or a person, or failed. */
declare class ToolCallError extends Error {
  /** The failure kind: denied, rejected, unavailable, tool_error, timeout, invalid_args, … */
  kind: string;
  /** The gate that decided it: pre_policy, approval, guard, execute, normalize, … */
  gate: string;
  /** The policy that decided it, if one did. */
  policy: string | null;
  /** Why, in words. */
  reason: string;
}
/** A result's text, as a model would see it (a file's numbered lines, a command's output). */
interface ToolText {
  content: string;
}
/** What the program prints; returned with its result (bounded). */
declare const console: { log(...values: unknown[]): void };
";

/// A tool name as a property key: bare when it is an identifier, quoted otherwise.
fn ident(name: &str) -> String {
    let bare = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if bare {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

fn doc(out: &mut String, text: &str, depth: usize) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let pad = "  ".repeat(depth);
    // A `*/` in a description would end the comment early.
    let text = text.replace("*/", "*\\/");
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() == 1 {
        let _ = writeln!(out, "{pad}/** {} */", lines[0]);
    } else {
        let _ = writeln!(out, "{pad}/**");
        for l in lines {
            let _ = writeln!(out, "{pad} * {}", l.trim_end());
        }
        let _ = writeln!(out, "{pad} */");
    }
}

/// The TypeScript type of `schema`, laid out at `depth`.
fn ts_type(schema: &Value, depth: usize) -> String {
    let Some(obj) = schema.as_object() else {
        // `true` accepts anything; `false` nothing.
        return match schema {
            Value::Bool(false) => "never".to_owned(),
            _ => "unknown".to_owned(),
        };
    };
    if let Some(c) = obj.get("const") {
        return literal(c);
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        return union(values.iter().map(literal));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = obj.get(key) {
            return union(options.iter().map(|o| ts_type(o, depth)));
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) => of_type(t, obj, depth),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| of_type(t, obj, depth)),
        ),
        _ if obj.contains_key("properties") => of_type("object", obj, depth),
        _ => "unknown".to_owned(),
    }
}

fn of_type(t: &str, obj: &serde_json::Map<String, Value>, depth: usize) -> String {
    match t {
        "string" => "string".to_owned(),
        "integer" | "number" => "number".to_owned(),
        "boolean" => "boolean".to_owned(),
        "null" => "null".to_owned(),
        "array" => {
            let item = obj
                .get("items")
                .map_or_else(|| "unknown".to_owned(), |items| ts_type(items, depth));
            if item.contains(' ') || item.contains('|') {
                format!("Array<{item}>")
            } else {
                format!("{item}[]")
            }
        }
        "object" => object(obj, depth),
        _ => "unknown".to_owned(),
    }
}

fn object(obj: &serde_json::Map<String, Value>, depth: usize) -> String {
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let props = obj.get("properties").and_then(Value::as_object);
    let extra = match obj.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(s @ Value::Object(_)) => Some(ts_type(s, depth + 1)),
        // Absent or `true`: anything more is allowed.
        _ if props.is_none() => Some("unknown".to_owned()),
        _ => None,
    };
    let Some(props) = props.filter(|p| !p.is_empty()) else {
        return match extra {
            Some(t) => format!("Record<string, {t}>"),
            None => "{}".to_owned(),
        };
    };
    let pad = "  ".repeat(depth + 1);
    let mut out = String::from("{\n");
    for (name, schema) in props {
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            doc(&mut out, d, depth + 1);
        }
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        let _ = writeln!(
            out,
            "{pad}{}{optional}: {};",
            ident(name),
            ts_type(schema, depth + 1)
        );
    }
    if let Some(t) = extra {
        let _ = writeln!(out, "{pad}[key: string]: {t};");
    }
    out.push_str(&"  ".repeat(depth));
    out.push('}');
    out
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        _ => "unknown".to_owned(),
    }
}

fn union(parts: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for p in parts {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    match seen.len() {
        0 => "never".to_owned(),
        _ => seen.join(" | "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_map_to_their_typescript_types() {
        assert_eq!(ts_type(&json!({"type": "string"}), 0), "string");
        assert_eq!(
            ts_type(&json!({"type": ["integer", "null"]}), 0),
            "number | null"
        );
        assert_eq!(ts_type(&json!({"enum": ["a", "b"]}), 0), "\"a\" | \"b\"");
        assert_eq!(
            ts_type(&json!({"type": "array", "items": {"type": "string"}}), 0),
            "string[]"
        );
        assert_eq!(
            ts_type(
                &json!({"type": "object", "properties": {"p": {"type": "string", "description": "a path"}, "n": {"type": "integer"}}, "required": ["p"], "additionalProperties": false}),
                0
            ),
            // Properties in the order the schema declares them (`preserve_order`).
            "{\n  /** a path */\n  p: string;\n  n?: number;\n}"
        );
        assert_eq!(ts_type(&json!({}), 0), "unknown");
        assert_eq!(
            ts_type(&json!({"type": "object"}), 0),
            "Record<string, unknown>"
        );
    }

    #[test]
    fn a_description_cannot_end_its_comment() {
        let mut out = String::new();
        doc(&mut out, "ends */ here", 0);
        assert_eq!(out, "/** ends *\\/ here */\n");
    }
}
