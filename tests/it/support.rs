//! Setup the integration tests share.

use std::path::Path;
use std::sync::Arc;

use ai_core::StaticToolSource;
use bootstrap::{Config, CoreTool, ToolCapabilities, create_capabilities, create_tool_source};

/// The composition root's capabilities over the workspace `root` (hidden files not shown), and
/// every core tool bound to them.
pub(crate) fn core_tools(root: &Path) -> (ToolCapabilities, Arc<StaticToolSource>) {
    let caps = create_capabilities(&Config {
        workspace_root: root.to_path_buf(),
        workspace_hidden: false,
    })
    .unwrap();
    let source = Arc::new(create_tool_source(CoreTool::ALL, &caps).unwrap());
    (caps, source)
}
