//! What baton's orchestrators share: files compiled into the binary and written once under
//! baton's home ([`bundle`]), and reading the files a model could have written without trusting
//! them ([`untrusted`], [`json_kind`]). The orchestrators themselves live in `baton-epic` (the
//! epic autopilot) and `baton-lifecycle` (`baton ralph` and lifecycle sessions).

pub mod bundle;
pub mod json_kind;
pub mod untrusted;
