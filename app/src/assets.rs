//! Stylesheet, live-refresh script and icon, embedded in the binary.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "../style/"]
#[include = "*.css"]
struct Styles;

#[derive(RustEmbed)]
#[folder = "../public/"]
#[exclude = ".gitkeep"]
struct Public;

pub async fn serve(Path(path): Path<String>) -> Response {
    let file = Styles::get(&path).or_else(|| Public::get(&path));
    match file {
        Some(f) => {
            let mime = f.metadata.mimetype().to_string();
            (
                [
                    (header::CONTENT_TYPE, mime),
                    // Short cache: assets change with the binary, and names carry no hash.
                    (header::CACHE_CONTROL, "public, max-age=300".to_string()),
                ],
                f.data.into_owned(),
            )
                .into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
