//! The token that only the runner can make, so only the runner can call [`crate::BoundTool::exec`].

/// Proof that the call to [`crate::BoundTool::exec`] comes from [`crate::ToolRunner`].
///
/// Its constructor is private to the runner module, so code outside it cannot produce one, and
/// so cannot call `exec` (invariant ARCH_SINGLE_EXECUTION_PATH). It is neither `Clone` nor
/// `Default`.
///
/// ```compile_fail,E0624
/// let permit = ai_core::ExecPermit::new();
/// ```
#[derive(Debug)]
pub struct ExecPermit {
    _private: (),
}

impl ExecPermit {
    pub(super) fn new() -> Self {
        Self { _private: () }
    }
}
