//! Images a model is shown (contract §14 "Vision"): read from a file's bytes, checked, and
//! made into what every provider takes — the first frame of an animation, at most
//! [`MAX_SIDE`] pixels on a side and [`MAX_ENCODED`] bytes — once, when they are read. A
//! provider that does not take the format asks for [`Image::as_png`].

use std::fmt;
use std::io::Cursor;
use std::sync::{Arc, OnceLock};

use base64::Engine;
use image::{DynamicImage, ImageFormat};

/// The largest image file read.
pub const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;
/// Decoded pixels beyond which an image is refused.
pub const MAX_PIXELS: u64 = 50_000_000;
/// The longest side a provider is sent.
pub const MAX_SIDE: u32 = 2048;
/// The largest encoded image a provider is sent.
pub const MAX_ENCODED: usize = 5 * 1024 * 1024;

/// A format providers take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl Format {
    pub fn mime(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
            Format::Gif => "image/gif",
            Format::Webp => "image/webp",
        }
    }

    fn codec(self) -> ImageFormat {
        match self {
            Format::Png => ImageFormat::Png,
            Format::Jpeg => ImageFormat::Jpeg,
            Format::Gif => ImageFormat::Gif,
            Format::Webp => ImageFormat::WebP,
        }
    }
}

/// An image ready to send: shared, its base64 text made once for every request.
#[derive(Clone)]
pub struct Image(Arc<Inner>);

struct Inner {
    format: Format,
    bytes: Vec<u8>,
    /// The size of the file as read (what `Image read` reports).
    original: (u32, u32),
    /// The size sent.
    size: (u32, u32),
    base64: OnceLock<String>,
    png: OnceLock<Image>,
}

impl fmt::Debug for Image {
    /// Never the bytes: a debug line must not carry the image.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Image({}, {}x{}, {} bytes)",
            self.0.format.mime(),
            self.0.size.0,
            self.0.size.1,
            self.0.bytes.len()
        )
    }
}

impl PartialEq for Image {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.format == other.0.format && self.0.bytes == other.0.bytes)
    }
}

/// Why bytes are no image deerflow sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Names what the bytes are instead.
    #[error("not a PNG, JPEG, GIF or WebP image ({0})")]
    NotAnImage(String),
    #[error("the image is {0}x{1} pixels, over the limit of 50 megapixels")]
    TooLarge(u32, u32),
    #[error("cannot decode the image: {0}")]
    Decode(String),
}

impl Image {
    /// The image in `bytes`, its format read from them, scaled down and re-encoded when a
    /// provider would not take it as it is.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Image, ImageError> {
        let format = sniff(&bytes)?;
        let original = dimensions(&bytes, format)?;
        if u64::from(original.0) * u64::from(original.1) > MAX_PIXELS {
            return Err(ImageError::TooLarge(original.0, original.1));
        }
        // Decoded even when it goes as it is: a truncated or corrupt file is a tool error
        // here, not a request the provider refuses (which would fail the run).
        let frame = decode(&bytes, format)?;
        let fits = original.0 <= MAX_SIDE && original.1 <= MAX_SIDE && bytes.len() <= MAX_ENCODED;
        if fits && !animated(&bytes, format) {
            return Ok(Image::new(format, bytes, original, original));
        }
        let (format, encoded, size) = fit(frame, format)?;
        Ok(Image::new(format, encoded, original, size))
    }

    fn new(format: Format, bytes: Vec<u8>, original: (u32, u32), size: (u32, u32)) -> Self {
        Image(Arc::new(Inner {
            format,
            bytes,
            original,
            size,
            base64: OnceLock::new(),
            png: OnceLock::new(),
        }))
    }

    pub fn format(&self) -> Format {
        self.0.format
    }

    pub fn mime(&self) -> &'static str {
        self.0.format.mime()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    /// Width and height of the image as it was read.
    pub fn original_size(&self) -> (u32, u32) {
        self.0.original
    }

    /// Width and height of the image as it is sent.
    pub fn size(&self) -> (u32, u32) {
        self.0.size
    }

    /// The encoded bytes as standard base64.
    pub fn base64(&self) -> &str {
        self.0
            .base64
            .get_or_init(|| base64::engine::general_purpose::STANDARD.encode(&self.0.bytes))
    }

    /// `data:MIME;base64,…`, as OpenAI's APIs take an image.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime(), self.base64())
    }

    /// The image in a format of `accepted`: itself, or as a PNG (made once).
    pub fn in_formats(&self, accepted: &[Format]) -> &Image {
        if accepted.contains(&self.0.format) {
            return self;
        }
        self.0.png.get_or_init(|| self.to_png())
    }

    fn to_png(&self) -> Image {
        let png = decode(&self.0.bytes, self.0.format)
            .and_then(|frame| encode(&frame, Format::Png))
            .map(|bytes| Image::new(Format::Png, bytes, self.0.original, self.0.size));
        // The bytes decoded when they were read; should they not now, the image goes as it
        // is and the provider says what it thinks of it.
        png.unwrap_or_else(|_| self.clone())
    }
}

/// The format the bytes are in, or an error naming what they are.
fn sniff(bytes: &[u8]) -> Result<Format, ImageError> {
    match image::guess_format(bytes) {
        Ok(ImageFormat::Png) => Ok(Format::Png),
        Ok(ImageFormat::Jpeg) => Ok(Format::Jpeg),
        Ok(ImageFormat::Gif) => Ok(Format::Gif),
        Ok(ImageFormat::WebP) => Ok(Format::Webp),
        Ok(other) => Err(ImageError::NotAnImage(format!(
            "{} image",
            other
                .extensions_str()
                .first()
                .unwrap_or(&"other")
                .to_uppercase()
        ))),
        Err(_) => Err(ImageError::NotAnImage(kind_of(bytes).into())),
    }
}

/// What bytes that are no image format are, roughly.
fn kind_of(bytes: &[u8]) -> &'static str {
    if bytes.is_empty() {
        "an empty file"
    } else if bytes.starts_with(b"%PDF") {
        "PDF"
    } else if bytes.starts_with(b"<svg") || bytes.windows(4).take(512).any(|w| w == b"<svg") {
        "SVG"
    } else if std::str::from_utf8(&bytes[..bytes.len().min(4096)]).is_ok() {
        "text"
    } else {
        "binary data"
    }
}

fn decode_error(e: impl fmt::Display) -> ImageError {
    ImageError::Decode(e.to_string())
}

fn dimensions(bytes: &[u8], format: Format) -> Result<(u32, u32), ImageError> {
    image::ImageReader::with_format(Cursor::new(bytes), format.codec())
        .into_dimensions()
        .map_err(decode_error)
}

/// Whether a GIF or WebP has more than one frame (then its first is sent).
fn animated(bytes: &[u8], format: Format) -> bool {
    match format {
        Format::Gif => gif_frames(bytes) > 1,
        Format::Webp => image::codecs::webp::WebPDecoder::new(Cursor::new(bytes))
            .map(|d| d.has_animation())
            .unwrap_or(false),
        Format::Png | Format::Jpeg => false,
    }
}

/// How many frames a GIF holds, up to 2, counted by walking its blocks without decoding
/// any (a malformed tail counts what came before it).
fn gif_frames(bytes: &[u8]) -> usize {
    // Header (6) and logical screen descriptor (7), then the global colour table.
    let Some(&flags) = bytes.get(10) else {
        return 0;
    };
    let mut at = 13 + colour_table_len(flags);
    let mut frames = 0;
    while frames < 2 {
        match bytes.get(at) {
            // An extension: introducer, label, then sub-blocks.
            Some(0x21) => at = skip_sub_blocks(bytes, at + 2),
            // An image descriptor (10 bytes), its local colour table, the LZW code size.
            Some(0x2C) => {
                let Some(&flags) = bytes.get(at + 9) else {
                    break;
                };
                frames += 1;
                at = skip_sub_blocks(bytes, at + 10 + colour_table_len(flags) + 1);
            }
            _ => break,
        }
    }
    frames
}

/// The bytes of the colour table a GIF descriptor's packed flags announce.
fn colour_table_len(flags: u8) -> usize {
    if flags & 0x80 == 0 {
        0
    } else {
        3 << ((flags & 0x07) + 1)
    }
}

/// The offset after a chain of GIF sub-blocks (each a length byte and that many bytes, ended
/// by a zero length), or past the end when the chain is cut.
fn skip_sub_blocks(bytes: &[u8], mut at: usize) -> usize {
    while let Some(&len) = bytes.get(at) {
        at += 1;
        if len == 0 {
            return at;
        }
        at += usize::from(len);
    }
    usize::MAX
}

/// The image's first frame, decoded.
fn decode(bytes: &[u8], format: Format) -> Result<DynamicImage, ImageError> {
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), format.codec());
    let mut limits = image::Limits::default();
    // 50 megapixels of 16-bit RGBA, with room for the decoder's own buffers.
    limits.max_alloc = Some(MAX_PIXELS * 8 + 64 * 1024 * 1024);
    reader.limits(limits);
    // EXIF orientation is not applied: the size reported is the file's.
    reader.decode().map_err(decode_error)
}

/// An image re-encoded to fit: its format, bytes and size.
type Fitted = (Format, Vec<u8>, (u32, u32));

/// Scales the frame into [`MAX_SIDE`] and encodes it under [`MAX_ENCODED`]: a JPEG stays a
/// JPEG, anything else becomes a PNG, or a JPEG when its PNG is too large.
fn fit(mut frame: DynamicImage, from: Format) -> Result<Fitted, ImageError> {
    let mut side = MAX_SIDE;
    loop {
        if frame.width() > side || frame.height() > side {
            frame = frame.resize(side, side, image::imageops::FilterType::Triangle);
        }
        let mut format = if from == Format::Jpeg {
            Format::Jpeg
        } else {
            Format::Png
        };
        let mut bytes = encode(&frame, format)?;
        if bytes.len() > MAX_ENCODED && format == Format::Png {
            format = Format::Jpeg;
            bytes = encode(&frame, format)?;
        }
        if bytes.len() <= MAX_ENCODED || side <= 256 {
            return Ok((format, bytes, (frame.width(), frame.height())));
        }
        side = side * 3 / 4;
    }
}

fn encode(frame: &DynamicImage, format: Format) -> Result<Vec<u8>, ImageError> {
    let mut out = Cursor::new(Vec::new());
    let result = match format {
        // JPEG has no alpha; 16-bit and float images are written as 8-bit.
        Format::Jpeg => DynamicImage::ImageRgb8(frame.to_rgb8()).write_to(&mut out, format.codec()),
        _ if frame.color().has_alpha() => {
            DynamicImage::ImageRgba8(frame.to_rgba8()).write_to(&mut out, format.codec())
        }
        _ => DynamicImage::ImageRgb8(frame.to_rgb8()).write_to(&mut out, format.codec()),
    };
    result.map_err(decode_error)?;
    Ok(out.into_inner())
}

/// Images for the tests here and in the layers above.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use std::io::Cursor;

    use image::{DynamicImage, ImageFormat};

    use super::Image;

    /// An image of `w`×`h` in `format`, with some detail so that it does not compress to
    /// nothing.
    pub fn encoded(w: u32, h: u32, format: ImageFormat) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x ^ y) % 256) as u8])
        });
        let mut out = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(img)
            .write_to(&mut out, format)
            .unwrap();
        out.into_inner()
    }

    /// A small PNG of `w`×`h`, read as [`Image::from_bytes`] reads it.
    pub fn test_png(w: u32, h: u32) -> Image {
        Image::from_bytes(encoded(w, h, ImageFormat::Png)).expect("a PNG")
    }
}

#[cfg(test)]
mod tests {
    use super::testing::encoded;
    use super::*;

    #[test]
    fn a_small_image_goes_as_it_was_read() {
        let png = encoded(40, 30, ImageFormat::Png);
        let img = Image::from_bytes(png.clone()).unwrap();
        assert_eq!(img.format(), Format::Png);
        assert_eq!(img.bytes(), png);
        assert_eq!((img.original_size(), img.size()), ((40, 30), (40, 30)));
        assert!(img
            .data_url()
            .starts_with("data:image/png;base64,iVBORw0KGgo"));
    }

    #[test]
    fn a_large_image_is_scaled_to_2048_keeping_its_aspect_ratio() {
        let jpeg = encoded(4000, 3000, ImageFormat::Jpeg);
        let img = Image::from_bytes(jpeg).unwrap();
        assert_eq!(img.original_size(), (4000, 3000));
        assert_eq!(img.size(), (2048, 1536));
        assert_eq!(img.format(), Format::Jpeg);
        assert!(img.bytes().len() <= MAX_ENCODED);
        assert_eq!(dimensions(img.bytes(), Format::Jpeg).unwrap(), (2048, 1536));
    }

    #[test]
    fn a_png_over_5_mib_is_made_smaller() {
        // Noise does not compress: 1500×1500 RGB is about 6.4 MiB as a PNG.
        let mut rng = fastrand::Rng::with_seed(7);
        let img = image::RgbImage::from_fn(1500, 1500, |_, _| {
            image::Rgb([rng.u8(..), rng.u8(..), rng.u8(..)])
        });
        let mut out = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(img)
            .write_to(&mut out, ImageFormat::Png)
            .unwrap();
        let png = out.into_inner();
        assert!(png.len() > MAX_ENCODED);
        let img = Image::from_bytes(png).unwrap();
        assert!(img.bytes().len() <= MAX_ENCODED, "{}", img.bytes().len());
        assert_eq!(img.original_size(), (1500, 1500));
    }

    #[test]
    fn gif_becomes_png_for_a_provider_that_does_not_take_it() {
        let gif = encoded(20, 10, ImageFormat::Gif);
        let img = Image::from_bytes(gif).unwrap();
        assert_eq!(img.format(), Format::Gif);
        let all = [Format::Png, Format::Jpeg, Format::Gif, Format::Webp];
        assert_eq!(img.in_formats(&all).format(), Format::Gif);
        let png = img.in_formats(&[Format::Png, Format::Jpeg, Format::Webp]);
        assert_eq!(png.format(), Format::Png);
        assert_eq!(dimensions(png.bytes(), Format::Png).unwrap(), (20, 10));
    }

    #[test]
    fn an_animated_gif_sends_its_first_frame() {
        use image::codecs::gif::GifEncoder;
        let mut out = Vec::new();
        {
            let mut enc = GifEncoder::new(&mut out);
            for shade in [0u8, 255] {
                let frame = image::RgbaImage::from_pixel(8, 8, image::Rgba([shade, 0, 0, 255]));
                enc.encode_frame(image::Frame::new(frame)).unwrap();
            }
        }
        assert!(animated(&out, Format::Gif));
        let img = Image::from_bytes(out).unwrap();
        assert_eq!(img.format(), Format::Png);
        let first = image::load_from_memory(img.bytes()).unwrap().to_rgba8();
        assert_eq!(first.get_pixel(0, 0).0, [0, 0, 0, 255]);
    }

    #[test]
    fn a_still_gif_is_one_frame_and_sent_as_it_is() {
        let gif = encoded(20, 10, ImageFormat::Gif);
        assert_eq!(gif_frames(&gif), 1);
        assert_eq!(Image::from_bytes(gif.clone()).unwrap().bytes(), gif);
        assert_eq!(gif_frames(&gif[..12]), 0);
    }

    #[test]
    fn a_truncated_or_corrupt_image_is_refused_not_sent() {
        for format in [ImageFormat::Png, ImageFormat::Jpeg, ImageFormat::Gif] {
            let whole = encoded(40, 30, format);
            let cut = whole[..whole.len() / 2].to_vec();
            let err = Image::from_bytes(cut).unwrap_err();
            assert!(matches!(err, ImageError::Decode(_)), "{format:?}: {err}");
        }
    }

    #[test]
    fn other_files_are_named() {
        let err = |b: &[u8]| Image::from_bytes(b.to_vec()).unwrap_err().to_string();
        assert_eq!(err(b"hello"), "not a PNG, JPEG, GIF or WebP image (text)");
        assert!(err(b"%PDF-1.7\n").contains("(PDF)"));
        assert!(err(b"BM\x36\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00").contains("BMP image"));
        assert!(err(&[0u8, 159, 146, 150, 1, 2]).contains("binary data"));
    }

    #[test]
    fn more_than_50_megapixels_is_refused_before_decoding() {
        // A PNG header claiming 10000×6000: only its dimensions are read.
        let mut png = encoded(1, 1, ImageFormat::Png);
        png[16..20].copy_from_slice(&10000u32.to_be_bytes());
        png[20..24].copy_from_slice(&6000u32.to_be_bytes());
        let crc = crc32(&png[12..29]);
        png[29..33].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            Image::from_bytes(png).unwrap_err(),
            ImageError::TooLarge(10000, 6000)
        );
    }

    /// The CRC a PNG chunk ends with.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn debug_never_shows_the_bytes() {
        let img = Image::from_bytes(encoded(3, 2, ImageFormat::Png)).unwrap();
        assert!(format!("{img:?}").starts_with("Image(image/png, 3x2,"));
    }
}
