//! Calling `exec` from outside the runner needs a permit, and no constructor is reachable.

fn main() {
    let _permit = ai_core::ExecPermit::new();
}
