//! The permit's field is private, so a struct literal does not compile either.

fn main() {
    let _permit = ai_core::ExecPermit { _private: () };
}
