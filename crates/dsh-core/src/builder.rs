//! Assembling a [`Pipeline`]: listeners per gate, in registration order, and the tunables.

use std::sync::{Arc, RwLock, Weak};

use crate::journal::Journal;
use crate::pipeline::{Observer, Pipeline, PipelineConfig};
use crate::policy::{Approver, Disposition, Guard, PrePolicy};
use crate::registry::Registry;
use crate::slots::Slots;
use crate::wrappers::Wrapper;

impl Pipeline {
    /// Starts a pipeline around `registry`, recording into `journal`.
    pub fn builder(registry: Registry, journal: Arc<dyn Journal>) -> PipelineBuilder {
        PipelineBuilder {
            inner: Pipeline {
                registry: RwLock::new(registry),
                policies: Vec::new(),
                approver: None,
                guards: Vec::new(),
                wrappers: Arc::from(Vec::new()),
                dispositions: Vec::new(),
                observers: Vec::new(),
                journal,
                config: PipelineConfig::default(),
                slots: Slots::new(1),
                me: Weak::new(),
            },
            wrappers: Vec::new(),
        }
    }
}

/// Assembles a [`Pipeline`]. Listeners of each gate keep their registration order.
pub struct PipelineBuilder {
    pub(crate) inner: Pipeline,
    pub(crate) wrappers: Vec<Arc<dyn Wrapper>>,
}

impl PipelineBuilder {
    #[must_use]
    pub fn pre_policy(mut self, policy: impl PrePolicy + 'static) -> Self {
        self.inner.policies.push(Arc::new(policy));
        self
    }
    #[must_use]
    pub fn pre_policy_arc(mut self, policy: Arc<dyn PrePolicy>) -> Self {
        self.inner.policies.push(policy);
        self
    }
    /// Mounts the approver; without one every `ask` ends as `unavailable` (SPEC P3).
    #[must_use]
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.inner.approver = Some(approver);
        self
    }
    #[must_use]
    pub fn guard(mut self, guard: impl Guard + 'static) -> Self {
        self.inner.guards.push(Arc::new(guard));
        self
    }
    #[must_use]
    pub fn guard_arc(mut self, guard: Arc<dyn Guard>) -> Self {
        self.inner.guards.push(guard);
        self
    }
    /// The first wrapper registered is the outermost.
    #[must_use]
    pub fn wrapper(mut self, wrapper: impl Wrapper + 'static) -> Self {
        self.wrappers.push(Arc::new(wrapper));
        self
    }
    #[must_use]
    pub fn disposition(mut self, disposition: impl Disposition + 'static) -> Self {
        self.inner.dispositions.push(Arc::new(disposition));
        self
    }
    #[must_use]
    pub fn disposition_arc(mut self, disposition: Arc<dyn Disposition>) -> Self {
        self.inner.dispositions.push(disposition);
        self
    }
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.inner.observers.push(observer);
        self
    }
    #[must_use]
    pub fn config(mut self, config: PipelineConfig) -> Self {
        self.inner.config = config;
        self
    }
    pub fn build(mut self) -> Arc<Pipeline> {
        self.inner.wrappers = self.wrappers.into();
        self.inner.config.max_parallel = self.inner.config.max_parallel.max(1);
        self.inner.slots = Slots::new(self.inner.config.max_parallel);
        let inner = self.inner;
        Arc::new_cyclic(|me| Pipeline {
            me: me.clone(),
            ..inner
        })
    }
}
