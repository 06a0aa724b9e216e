//! Only the runner can call `BoundTool::exec`: code outside it cannot make an `ExecPermit`.

#[test]
fn exec_permit_cannot_be_built_outside_the_runner() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
