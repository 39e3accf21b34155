//! `view_image`: shows the model an image file (contract §14), for agents whose model has
//! `supports_vision: true`. The answer is one line; the image goes into the agent's next
//! request beside it.

use std::io::Read;

use schemars::JsonSchema;
use serde::Deserialize;

use super::target::{blocking, open_regular, resolve_target, READ_DIR_HINT};
use crate::args::{spec, with_args};
use crate::ToolError;
use crate::{Concurrency, Tool, ToolContext, ToolOutput};
use deerflow_model::image::{Image, MAX_FILE_BYTES};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::beneath::OpenMode;
use deerflow_workspace::Access;

pub const VIEW_IMAGE: &str = "view_image";

#[derive(Debug, Clone, Copy, Default)]
pub struct ViewImageTool;

/// `view_image`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ViewImageArgs {
    /// Image file to view (PNG, JPEG, GIF or WebP): relative to the workspace, absolute
    /// inside it, or a virtual path (/mnt/user-data/..., /mnt/skills/...).
    pub image_path: String,
}

impl Tool for ViewImageTool {
    fn concurrency(&self, _call: &ToolCall) -> Concurrency {
        Concurrency::Shared
    }

    fn name(&self) -> &str {
        VIEW_IMAGE
    }

    fn spec(&self) -> ToolSpec {
        spec::<ViewImageArgs>(
            VIEW_IMAGE,
            "View an image file (PNG, JPEG, GIF or WebP, at most 20 MiB): you see the image in \
             your next turn. Large images are scaled down.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        with_args(&call.arguments, move |a| async move {
            view_image(a, ctx).await.unwrap_or_else(|e| e)
        })
    }
}

async fn view_image(args: ViewImageArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let target = resolve_target(ctx, &args.image_path, Access::Read)?;
    let shown = ctx.workspace.display_path(&target.abs);
    let image = blocking(move || {
        let file = open_regular(&target, &shown, OpenMode::Read, READ_DIR_HINT)?;
        let bytes = read_capped(file).map_err(|e| ToolError::cannot("read", &shown, e))?;
        let bytes = bytes.ok_or_else(|| {
            ToolError::Message(format!("{shown} is larger than 20 MiB, the image limit"))
        })?;
        Image::from_bytes(bytes)
            .map(|image| (image, shown.clone()))
            .map_err(|e| ToolError::Message(format!("{shown}: {e}")).into())
    })
    .await;
    let (image, shown) = image?;
    let (w, h) = image.original_size();
    let mut out = ToolOutput::ok(format!("Image read: {shown} ({w}x{h})"));
    out.image = Some(image);
    Ok(out)
}

/// The file's bytes, `None` when it holds more than [`MAX_FILE_BYTES`] (read no further).
pub fn read_capped(file: impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= MAX_FILE_BYTES).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx, run};
    use crate::ToolStatus::{Error as E, Ok as O};
    use deerflow_model::image::testing::encoded;
    use deerflow_model::image::Format;
    use image::ImageFormat;
    use serde_json::json;

    async fn view(root: &std::path::Path, path: &str) -> ToolOutput {
        let call = ToolCall::new("c1", VIEW_IMAGE, json!({ "image_path": path }));
        ViewImageTool.call(&call, &ctx(root)).await
    }

    #[tokio::test]
    async fn an_image_is_read_and_carried_beside_one_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("img")).unwrap();
        std::fs::write(
            dir.path().join("img/a.webp"),
            encoded(30, 20, ImageFormat::WebP),
        )
        .unwrap();
        let out = view(dir.path(), "img/a.webp").await;
        assert_eq!(
            (out.status, out.text().as_ref()),
            (O, "Image read: img/a.webp (30x20)")
        );
        assert_eq!(out.image.map(|i| i.format()), Some(Format::Webp));
    }

    #[tokio::test]
    async fn what_is_no_image_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("notes.png"), "just text").unwrap();
        std::fs::write(
            root.join("big.png"),
            vec![0u8; (MAX_FILE_BYTES + 1) as usize],
        )
        .unwrap();
        let c = ctx(root);
        for (path, want) in [
            (
                "notes.png",
                "Error: notes.png: not a PNG, JPEG, GIF or WebP image (text)",
            ),
            (
                "big.png",
                "Error: big.png is larger than 20 MiB, the image limit",
            ),
            ("missing.png", "Error: file not found: missing.png"),
        ] {
            let (status, text) = run(&ViewImageTool, &c, json!({ "image_path": path })).await;
            assert_eq!((status, text.as_str()), (E, want), "{path}");
        }
        let out = view(root, "../x.png").await;
        assert_eq!(out.status, E);
        assert!(out.image.is_none());
    }
}
