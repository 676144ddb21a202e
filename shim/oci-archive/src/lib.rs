//! Writes an OCI image archive (an image layout as a tar file) of raw
//! layers with media types of their own, such as a wasm component and a
//! moat policy, that `ctr image import` takes.
//!
//! The shim's tests and its density measurement build their images with
//! it. runwasi's `oci-tar-builder` does the same on oci-spec 0.6; these
//! tests build images with oci-spec 0.9's types, which it does not take.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use oci_spec::image::{
    Descriptor, DescriptorBuilder, Digest, ImageConfiguration, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, PlatformBuilder, SCHEMA_VERSION,
};
use sha2::Digest as _;

/// The media type of a wasm component layer, as runwasi and wasm OCI
/// tooling name it.
pub const WASM_LAYER_MEDIA_TYPE: &str =
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm";

/// Why an archive could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A layer file could not be read.
    #[error("cannot read layer {}: {source}", .path.display())]
    Layer {
        /// The layer's file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Writing the archive failed.
    #[error("cannot write the archive: {0}")]
    Write(#[from] std::io::Error),
    /// A descriptor, manifest or index could not be built or serialized.
    #[error("cannot describe the image: {0}")]
    Spec(#[from] oci_spec::OciSpecError),
    /// The archive holds one image: one configuration.
    #[error("an archive holds exactly one image configuration, not {0}")]
    Configs(usize),
}

/// An image configuration the archive can describe: its platform.
pub trait OciConfig {
    /// The configuration as JSON.
    fn to_json(&self) -> Result<String, oci_spec::OciSpecError>;
    /// Its operating system, for the index's platform.
    fn os(&self) -> String;
    /// Its architecture, for the index's platform.
    fn architecture(&self) -> String;
}

impl OciConfig for ImageConfiguration {
    fn to_json(&self) -> Result<String, oci_spec::OciSpecError> {
        ImageConfiguration::to_string(self)
    }

    fn os(&self) -> String {
        ImageConfiguration::os(self).to_string()
    }

    fn architecture(&self) -> String {
        ImageConfiguration::architecture(self).to_string()
    }
}

/// Layers and one configuration, written out by [`Builder::build`].
pub struct Builder<C> {
    layers: Vec<(PathBuf, String)>,
    configs: Vec<(C, String, MediaType)>,
}

impl<C> Default for Builder<C> {
    fn default() -> Self {
        Builder {
            layers: Vec::new(),
            configs: Vec::new(),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl<C: OciConfig> Builder<C> {
    /// Adds a layer: the file's bytes as they are, with `media_type`.
    pub fn add_layer_with_media_type(&mut self, layer: &Path, media_type: String) -> &mut Self {
        self.layers.push((layer.to_owned(), media_type));
        self
    }

    /// Sets the image's configuration and its name (`registry/repo:tag`).
    pub fn add_config(&mut self, config: C, name: String, media_type: MediaType) -> &mut Self {
        self.configs.push((config, name, media_type));
        self
    }

    /// Writes the archive: every layer, the configuration and the manifest
    /// as blobs, an index naming the image, and the layout marker.
    pub fn build<W: Write>(&mut self, w: W) -> Result<(), Error> {
        let [(config, name, config_type)] = self.configs.as_slice() else {
            return Err(Error::Configs(self.configs.len()));
        };
        let mut tar = tar::Builder::new(w);
        let mut blob = |bytes: &[u8], media_type: MediaType| -> Result<Descriptor, Error> {
            let hex = sha256_hex(bytes);
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o444);
            header.set_size(bytes.len() as u64);
            header.set_path(format!("blobs/sha256/{hex}"))?;
            header.set_cksum();
            tar.append(&header, bytes)?;
            let digest: Digest = format!("sha256:{hex}").parse()?;
            Ok(DescriptorBuilder::default()
                .media_type(media_type)
                .digest(digest)
                .size(bytes.len() as u64)
                .build()?)
        };
        let mut layers = Vec::new();
        for (path, media_type) in &self.layers {
            let bytes = std::fs::read(path).map_err(|source| Error::Layer {
                path: path.clone(),
                source,
            })?;
            layers.push(blob(&bytes, MediaType::from(media_type.as_str()))?);
        }
        let config_desc = blob(config.to_json()?.as_bytes(), config_type.clone())?;
        let mut annotations =
            HashMap::from([("io.containerd.image.name".to_owned(), name.clone())]);
        if let Some((_, tag)) = name.rsplit_once(':') {
            annotations.insert(
                "org.opencontainers.image.ref.name".to_owned(),
                tag.to_owned(),
            );
        }
        let manifest = ImageManifestBuilder::default()
            .schema_version(SCHEMA_VERSION)
            .media_type(MediaType::ImageManifest)
            .config(config_desc)
            .layers(layers)
            .annotations(annotations.clone())
            .build()?
            .to_string()?;
        let manifest_desc = blob(manifest.as_bytes(), MediaType::ImageManifest)?;
        let platform = PlatformBuilder::default()
            .os(config.os().as_str())
            .architecture(config.architecture().as_str())
            .build()?;
        let mut manifest_desc = manifest_desc;
        manifest_desc.set_platform(Some(platform));
        manifest_desc.set_annotations(Some(annotations));
        let index = ImageIndexBuilder::default()
            .schema_version(SCHEMA_VERSION)
            .media_type(MediaType::ImageIndex)
            .manifests(vec![manifest_desc])
            .build()?
            .to_string()?;
        for (path, bytes) in [
            ("index.json", index.into_bytes()),
            ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
        ] {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o444);
            header.set_size(bytes.len() as u64);
            header.set_path(path)?;
            header.set_cksum();
            tar.append(&header, bytes.as_slice())?;
        }
        tar.finish()?;
        Ok(())
    }
}
