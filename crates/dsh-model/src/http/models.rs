//! The models an endpoint serves, for a front end to offer (the REPL's `/model`): `GET
//! {base_url}{path}` with the endpoint's own headers, read as OpenAI's and Anthropic's list
//! (`data[].id`) or Ollama's tags (`models[].name`). Bounded: a few seconds, a megabyte, a
//! few hundred names.

use std::time::Duration;

use serde_json::Value;

use super::{Endpoint, chain};
use crate::types::ModelError;

/// How long listing may take: it runs while a person waits at a picker.
const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a listing read.
const LIST_MAX_BYTES: usize = 1 << 20;
/// The most names kept.
const LIST_MAX_NAMES: usize = 500;

impl Endpoint {
    /// The model ids the endpoint lists at `{base_url}{path}`, sorted, without duplicates.
    pub(crate) async fn list_models(&self, path: &str) -> Result<Vec<String>, ModelError> {
        let url = format!("{}{path}", self.base_url);
        let mut request = self.client.get(&url).timeout(LIST_TIMEOUT);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let unreachable = |e: reqwest::Error| ModelError::Unreachable {
            url: url.clone(),
            reason: chain(&e),
            hint: None,
        };
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            body.extend_from_slice(&chunk);
            if body.len() > LIST_MAX_BYTES {
                return Err(ModelError::Http {
                    status: status.as_u16(),
                    message: format!("the model list at {url} is over {LIST_MAX_BYTES} bytes"),
                    hint: None,
                });
            }
        }
        if !status.is_success() {
            return Err(ModelError::Http {
                status: status.as_u16(),
                message: String::from_utf8_lossy(&body).chars().take(200).collect(),
                hint: Some(format!("{url} does not list models")),
            });
        }
        let value: Value = serde_json::from_slice(&body).map_err(|e| ModelError::Http {
            status: status.as_u16(),
            message: format!("the model list at {url} is not JSON: {e}"),
            hint: None,
        })?;
        Ok(names(&value))
    }
}

/// The names in a listing: `data[].id` (OpenAI, Anthropic, Ollama's `/v1/models`) or
/// `models[].name` (Ollama's `/api/tags`); anything else is no name.
fn names(value: &Value) -> Vec<String> {
    let from = |list: &str, field: &str| -> Vec<String> {
        value[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m[field].as_str())
            // A name a request can carry: no control characters, nothing huge.
            .filter(|n| !n.is_empty() && n.len() <= 200 && !n.chars().any(char::is_control))
            .map(str::to_owned)
            .collect()
    };
    let mut out = from("data", "id");
    out.extend(from("models", "name"));
    out.sort();
    out.dedup();
    out.truncate(LIST_MAX_NAMES);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_of_each_shape_give_their_names() {
        let openai = json!({"object":"list","data":[{"id":"gpt-b"},{"id":"gpt-a"},{"id":""},{"id":"x\u{1b}]0;t\u{7}"}]});
        assert_eq!(names(&openai), ["gpt-a", "gpt-b"]);
        let ollama = json!({"models":[{"name":"qwen2.5-coder:7b"},{"name":"llama3"}]});
        assert_eq!(names(&ollama), ["llama3", "qwen2.5-coder:7b"]);
        assert!(names(&json!({"error": "nope"})).is_empty());
        assert!(names(&json!([1, 2])).is_empty());
    }
}
