//! `/model`: the model of the next request — a name, or a pick among the current model,
//! what the endpoint serves and the presets; the switch is journaled.

use dsh_agent::{Command, Reply};

use super::Live;
use super::actions::ask;
use super::input::{Input, Read};
use super::model_pick;
use super::turn::Ui;
use super::visible::visible;
use crate::signals::Signals;

/// `/model [PROVIDER/MODEL]`: switches the model of the next request. Without an argument,
/// a picker of the configured and known models, then the endpoint and the key's variable.
/// The picker and the line editor read the terminal on threads of their own, which a
/// hung-up terminal may keep spinning: they are not waited for once the session is over.
pub(crate) async fn model(
    choice: Option<String>,
    live: &mut Live,
    ui: &mut Ui,
    input: &mut Input,
    signals: &Signals,
) {
    let st = ui.render.style();
    let env = dsh_config::process_env();
    let status = live.runtime.status();
    // What the endpoint serves, beside the presets (it may list nothing, or not answer).
    let served = if choice.is_none() {
        match ask(live, Command::ListModels).await {
            Some(Reply::Models(Ok(names))) => names,
            Some(Reply::Models(Err(why))) => {
                ui.screen.line(&st.dim(&format!(
                    "the endpoint does not list its models ({}); the presets follow",
                    visible(&why, false)
                )));
                Vec::new()
            }
            _ => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let mut choices = dsh_agent::model_choices(&live.loaded, &status.model);
    // A served model is the current provider at the current endpoint: after the current
    // model, before the presets.
    if let Ok(provider) = status.provider.parse::<dsh_config::Provider>() {
        let at = 1.min(choices.len());
        let extra: Vec<dsh_agent::ModelChoice> = served
            .iter()
            .filter(|n| **n != status.model)
            .map(|n| dsh_agent::ModelChoice {
                provider,
                model: n.clone(),
                base_url: Some(status.base_url.clone()),
                api_key_env: None,
            })
            .collect();
        choices.retain(|c| {
            !extra
                .iter()
                .any(|e| e.provider == c.provider && e.model == c.model)
        });
        choices.splice(at..at, extra);
    }
    let label = |c: &dsh_agent::ModelChoice| {
        visible(&format!("{}/{}", c.provider.as_str(), c.model), false).into_owned()
    };
    let mut picked = match choice {
        Some(text) => match parse_choice(&text, &status.provider) {
            Ok(c) => c,
            Err(e) => {
                ui.screen.line(&st.red(&format!("/model: {e}")));
                return;
            }
        },
        None => {
            if !ui.screen.terminal() {
                ui.screen
                    .line(&st.dim("/model PROVIDER/MODEL switches; known models:"));
                for c in &choices {
                    ui.screen.line(&format!("  {}", label(c)));
                }
                return;
            }
            ui.screen.flush();
            let items: Vec<String> = choices.iter().map(label).collect();
            let title = "pick a model (↑/↓, Enter; Esc leaves it as it is)".to_owned();
            let picked = tokio::select! {
                p = tokio::task::spawn_blocking(move || model_pick::pick(&title, &items, 0, st)) => p,
                () = signals.token().cancelled() => return,
            };
            let Ok(Ok(Some(i))) = picked else {
                ui.screen.line(&st.dim("the model stays"));
                return;
            };
            let mut c = choices[i].clone();
            // A model the endpoint serves needs no questions: same endpoint, same key.
            if c.base_url.is_some() && c.provider.as_str() == status.provider {
                return switch(live, ui, &env, c).await;
            }
            let (base, key) = dsh_agent::choice_defaults(&live.loaded, &env, &c);
            // A hosted provider whose key is not set cannot be used: said before any question.
            if let Some(var) = &key
                && base.trim_end_matches('/') == c.provider.default_base_url()
                && env.get(var).is_none_or(|v| v.trim().is_empty())
            {
                ui.screen.line(&st.yellow(&format!(
                    "{} needs its key: export {var}=<your key> (or name another variable under [model] api_key_env), then /model again",
                    c.provider.as_str()
                )));
                return;
            }
            ui.screen.line(&st.dim("base URL (Enter keeps it):"));
            ui.screen.flush();
            let url = tokio::select! {
                read = input.read(&base) => read,
                () = signals.token().cancelled() => return,
            };
            if let Ok(Read::Line(url)) = url {
                c.base_url = Some(url.trim().to_owned()).filter(|u| !u.is_empty());
            }
            ui.screen.line(&st.dim(
                "the environment variable holding the API key (Enter keeps it; empty: none):",
            ));
            ui.screen.flush();
            let var = tokio::select! {
                read = input.read(key.as_deref().unwrap_or("")) => read,
                () = signals.token().cancelled() => return,
            };
            if let Ok(Read::Line(var)) = var {
                c.api_key_env = Some(var.trim().to_owned());
            }
            c
        }
    };
    if picked.api_key_env.as_deref() == Some("") {
        picked.api_key_env = None;
    }
    switch(live, ui, &env, picked).await;
}

/// Switches to `picked` (journaled as `model_changed`, so `/reload` and a resume keep it).
async fn switch(
    live: &mut Live,
    ui: &mut Ui,
    env: &std::collections::BTreeMap<String, String>,
    picked: dsh_agent::ModelChoice,
) {
    let st = ui.render.style();
    match dsh_agent::provider_for_choice(&live.loaded, env, &picked) {
        Ok(provider) => match ask(live, Command::SwitchModel(provider)).await {
            Some(Reply::Recorded(Err(e))) => {
                ui.screen.line(&st.red(&format!("/model: {e}")));
            }
            _ => {
                let status = live.runtime.status();
                ui.screen.line(&st.dim(&format!(
                    "the next request goes to {}/{}",
                    status.provider,
                    visible(&status.model, false)
                )));
            }
        },
        Err(e) => ui.screen.line(&st.red(&format!("/model: {e}"))),
    }
}

/// `PROVIDER/MODEL`, or a model of the current provider.
fn parse_choice(text: &str, current: &str) -> Result<dsh_agent::ModelChoice, String> {
    let (provider, model) = match text.split_once('/') {
        Some((p, m)) if p.parse::<dsh_config::Provider>().is_ok() => (p, m),
        _ => (current, text),
    };
    let provider: dsh_config::Provider = provider.parse()?;
    if model.trim().is_empty() || model.chars().any(char::is_control) {
        return Err(format!("{text:?} names no model"));
    }
    Ok(dsh_agent::ModelChoice {
        provider,
        model: model.trim().to_owned(),
        base_url: None,
        api_key_env: None,
    })
}
