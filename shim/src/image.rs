//! What the shim reads of a container's image from containerd, in the
//! shim's own process before the container starts: the image's own
//! environment (the `Env` of its configuration), so that
//! [`crate::deployment`] can tell the image's `MOAT_*` lines from the pod
//! spec's, and, for a wasm OCI image, its component and policy layers.
//!
//! containerd hands a container the image's `Env` merged under the pod
//! spec's variables; the image's configuration is the only record of which
//! were the image's. Everything here is the image's, so untrusted, and
//! every read is bounded.

use std::fmt;

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::content_client::ContentClient;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::{GetContainerRequest, GetImageRequest, ReadContentRequest};
use containerd_client::tonic::Request;
use containerd_client::tonic::transport::Channel;
use containerd_client::with_namespace;
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::deployment::{MAX_POLICY_LAYER, POLICY_LAYER_MEDIA_TYPE};

/// The media type of a wasm component layer, as runwasi and wasm OCI
/// tooling name it.
pub const COMPONENT_LAYER_MEDIA_TYPE: &str =
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm";

/// The media types of the layers the shim takes from a wasm OCI image:
/// components (runwasi's component layer type, and plain
/// `application/wasm`) and a moat policy.
pub const LAYER_TYPES: &[&str] = &[
    COMPONENT_LAYER_MEDIA_TYPE,
    "application/wasm",
    POLICY_LAYER_MEDIA_TYPE,
];

/// Largest manifest, index or configuration read. They are a few KiB; a
/// configuration with a long history is tens of KiB.
pub const MAX_IMAGE_DOCUMENT: usize = 4 << 20;

/// Largest component layer read, in bytes. Components are a few MiB; the
/// shim holds the layer in memory and hands it to the container's process.
pub const MAX_COMPONENT: usize = 128 << 20;

/// Most manifests (and nested indexes) of an image index looked at: one
/// per platform, and an attestation beside each.
pub const MAX_INDEX_MANIFESTS: usize = 64;

/// The media types of an image index (OCI and Docker's manifest list).
const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// What the shim read of a container's image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFacts {
    /// The image's name, as the container record gives it.
    pub name: String,
    /// The `Env` entries of its configuration (of every platform's, for an
    /// index), as written: `KEY=VALUE`.
    pub env: Vec<String>,
    /// Its layers of [`LAYER_TYPES`] when it is a wasm OCI image (its
    /// configuration's architecture is `wasm`); empty for an image built as
    /// a Linux image is.
    pub layers: Vec<Layer>,
}

/// One layer of a wasm OCI image.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    /// Its media type.
    pub media_type: String,
    /// Its bytes.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layer")
            .field("media_type", &self.media_type)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// Why the image could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// containerd refused or failed a request.
    #[error("containerd: {what}: {message}")]
    Containerd {
        /// What was asked.
        what: String,
        /// What containerd said.
        message: String,
    },
    /// A document or layer is larger than the shim reads.
    #[error("the image's {what} is larger than {max} bytes, the most the shim reads")]
    TooLarge {
        /// Which part.
        what: String,
        /// The bound.
        max: usize,
    },
    /// A manifest, index or configuration is not what its type says.
    #[error("the image's {what} is not valid: {source}")]
    Invalid {
        /// Which part.
        what: String,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Configuration {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    config: Option<ProcessConfig>,
}

#[derive(Deserialize)]
struct ProcessConfig {
    #[serde(rename = "Env", default)]
    env: Option<Vec<String>>,
}

/// Reads what the shim needs of container `id`'s image from the containerd
/// at `address`, in `namespace`. `None` when the container has no image (a
/// root filesystem of its own, as `ctr run --rootfs` makes).
///
/// # Errors
/// [`ImageError`]: the container must not start, since what its image sets
/// cannot be known.
pub async fn read(
    address: &str,
    namespace: &str,
    id: &str,
) -> Result<Option<ImageFacts>, ImageError> {
    let channel = containerd_client::connect(address)
        .await
        .map_err(|e| containerd("connecting", e))?;
    let request = with_namespace!(GetContainerRequest { id: id.to_owned() }, namespace);
    let container = ContainersClient::new(channel.clone())
        .get(request)
        .await
        .map_err(|e| containerd(&format!("container {id}"), e))?
        .into_inner()
        .container;
    let Some(name) = container.map(|c| c.image).filter(|name| !name.is_empty()) else {
        return Ok(None);
    };
    let request = with_namespace!(GetImageRequest { name: name.clone() }, namespace);
    let target = ImagesClient::new(channel.clone())
        .get(request)
        .await
        .map_err(|e| containerd(&format!("image {name}"), e))?
        .into_inner()
        .image
        .and_then(|image| image.target)
        .ok_or_else(|| ImageError::Containerd {
            what: format!("image {name}"),
            message: "the image has no target".to_owned(),
        })?;
    let content = Content {
        channel,
        namespace: namespace.to_owned(),
    };
    let mut facts = ImageFacts {
        name,
        ..ImageFacts::default()
    };
    // Every manifest the target reaches, through nested indexes too: the
    // environment of each counts, since the one the container was made
    // from is not recorded.
    let mut manifests = Vec::new();
    let mut pending = vec![(target.media_type, target.digest)];
    let mut indexes = 0;
    while let Some((media_type, digest)) = pending.pop() {
        if !INDEX_TYPES.contains(&media_type.as_str()) {
            manifests.push(digest);
            continue;
        }
        let index: Index = content.json("index", &digest).await?;
        indexes += 1;
        pending.extend(
            index
                .manifests
                .into_iter()
                .map(|m| (m.media_type, m.digest)),
        );
        // Counting the indexes read ends a cycle of indexes too.
        if indexes + manifests.len() + pending.len() > MAX_INDEX_MANIFESTS {
            return Err(ImageError::TooLarge {
                what: "index (manifests, nested indexes included)".to_owned(),
                max: MAX_INDEX_MANIFESTS,
            });
        }
    }
    for digest in manifests {
        let manifest: Manifest = content.json("manifest", &digest).await?;
        let config: Configuration = content
            .json("configuration", &manifest.config.digest)
            .await?;
        facts
            .env
            .extend(config.config.and_then(|c| c.env).unwrap_or_default());
        if config.architecture == "wasm" && facts.layers.is_empty() {
            for layer in manifest
                .layers
                .iter()
                .filter(|l| LAYER_TYPES.contains(&l.media_type.as_str()))
            {
                let policy = layer.media_type == POLICY_LAYER_MEDIA_TYPE;
                // A policy is read one byte past its bound, so that the
                // deployment can say it is too large rather than cut it.
                let max = if policy {
                    MAX_POLICY_LAYER + 1
                } else {
                    MAX_COMPONENT
                };
                let what = format!("layer {}", layer.digest);
                let bytes = content.read(&what, &layer.digest, max, policy).await?;
                facts.layers.push(Layer {
                    media_type: layer.media_type.clone(),
                    bytes,
                });
            }
        }
    }
    Ok(Some(facts))
}

fn containerd(what: &str, e: impl fmt::Display) -> ImageError {
    ImageError::Containerd {
        what: what.to_owned(),
        message: e.to_string(),
    }
}

/// containerd's content store, in one namespace.
struct Content {
    channel: Channel,
    namespace: String,
}

impl Content {
    /// The blob `digest`, at most `max` bytes; past it, an error, or (when
    /// `keep_excess` is set) the first `max` bytes.
    async fn read(
        &self,
        what: &str,
        digest: &str,
        max: usize,
        keep_excess: bool,
    ) -> Result<Vec<u8>, ImageError> {
        // One byte past the bound tells a blob at the bound from a longer
        // one without reading the rest.
        let request = ReadContentRequest {
            digest: digest.to_owned(),
            offset: 0,
            size: i64::try_from(max + 1).unwrap_or(i64::MAX),
        };
        let mut stream = ContentClient::new(self.channel.clone())
            .read(with_namespace!(request, self.namespace))
            .await
            .map_err(|e| containerd(what, e))?
            .into_inner();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| containerd(what, e))?;
            bytes.extend_from_slice(&chunk.data);
            if bytes.len() > max {
                if keep_excess {
                    bytes.truncate(max);
                    break;
                }
                return Err(ImageError::TooLarge {
                    what: what.to_owned(),
                    max,
                });
            }
        }
        Ok(bytes)
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        digest: &str,
    ) -> Result<T, ImageError> {
        let bytes = self.read(what, digest, MAX_IMAGE_DOCUMENT, false).await?;
        serde_json::from_slice(&bytes).map_err(|source| ImageError::Invalid {
            what: what.to_owned(),
            source,
        })
    }
}
