//! One module per provider, each a [`ChatModel`](super::ChatModel) and a `build`
//! constructor that `registry` maps its kind to. The HTTP ones share `http` (transport)
//! and `sse` (framing) and only build request bodies and assemble stream events.

pub mod anthropic;
pub mod openai_chat;
pub mod replay;
