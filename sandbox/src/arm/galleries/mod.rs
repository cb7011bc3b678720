//! Azure Compute Galleries: `Microsoft.Compute/galleries/{g}`, image definitions
//! `…/galleries/{g}/images/{i}` and image versions `…/images/{i}/versions/{x.y.z}`, each with
//! PUT (201 create, 200 update), PATCH, GET, DELETE (202, 204 when absent) and a list (a
//! gallery's also per subscription), as Azure answers them: async operations with
//! `Azure-AsyncOperation` (and `Location` on DELETE), `provisioningState` `Creating`/`Updating`/
//! `Deleting` until the operation succeeds, 404 `ParentResourceNotFound` for a child (PUT, GET,
//! list) of a parent that does not exist, 409 `CannotDeleteResource` for a parent that still has children. What a
//! body must hold is in `body.rs`; a VM created from a gallery image resolves it in
//! `image_reference.rs`.

mod body;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, accepted, json_response, list_response, parse_object};
use super::latency::Step;
use super::state::{
    Action, Collection, Kind, Resource, State, key, props, required_location, resource_id,
    stamp_envelope, written_body,
};

const GALLERIES: &str =
    "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries";

/// The subscription-level list (every resource group's).
const GALLERIES_ALL: &str = "/subscriptions/{sub}/providers/Microsoft.Compute/galleries";

/// The gallery routes.
pub fn routes() -> Router<Emulator> {
    let gallery = format!("{GALLERIES}/{{gallery}}");
    let image = format!("{gallery}/images/{{image}}");
    let version = format!("{image}/versions/{{version}}");
    Router::new()
        .route(GALLERIES, get(list_galleries))
        .route(GALLERIES_ALL, get(list_all_galleries))
        .route(
            &gallery,
            get(read_gallery)
                .put(put_gallery)
                .patch(patch_gallery)
                .delete(delete_gallery),
        )
        .route(&format!("{gallery}/images"), get(list_images))
        .route(
            &image,
            get(read_image)
                .put(put_image)
                .patch(patch_image)
                .delete(delete_image),
        )
        .route(&format!("{image}/versions"), get(list_versions))
        .route(
            &version,
            get(read_version)
                .put(put_version)
                .patch(patch_version)
                .delete(delete_version),
        )
}

/// One addressed gallery resource: its kind, id, name, and its parent's id and name.
struct Address {
    sub: String,
    kind: Kind,
    id: String,
    name: String,
    parent: Option<(String, String)>,
}

impl Address {
    fn gallery(sub: &str, rg: &str, gallery: &str) -> Self {
        Self {
            sub: sub.to_owned(),
            kind: Kind::Gallery,
            id: resource_id(sub, rg, Kind::Gallery, gallery),
            name: gallery.to_owned(),
            parent: None,
        }
    }

    fn image(sub: &str, rg: &str, gallery: &str, image: &str) -> Self {
        let parent = Self::gallery(sub, rg, gallery);
        Self {
            sub: sub.to_owned(),
            kind: Kind::GalleryImage,
            id: format!("{}/images/{image}", parent.id),
            name: image.to_owned(),
            parent: Some((parent.id, parent.name)),
        }
    }

    fn version(sub: &str, rg: &str, gallery: &str, image: &str, version: &str) -> Self {
        let parent = Self::image(sub, rg, gallery, image);
        Self {
            sub: sub.to_owned(),
            kind: Kind::GalleryImageVersion,
            id: format!("{}/versions/{version}", parent.id),
            name: version.to_owned(),
            parent: Some((parent.id, parent.name)),
        }
    }

    /// The children's collection under this resource (`…/images`, `…/versions`).
    fn children(&self) -> Option<String> {
        match self.kind {
            Kind::Gallery => Some(format!("{}/images", self.id)),
            Kind::GalleryImage => Some(format!("{}/versions", self.id)),
            _ => None,
        }
    }
}

type GalleryPath = Path<(String, String, String)>;
type ImagePath = Path<(String, String, String, String)>;
type VersionPath = Path<(String, String, String, String, String)>;

/// A gallery resource as GET and lists return it.
fn render(ctx: &Ctx) -> impl Fn(&State, &Resource) -> Value + '_ {
    let replication = ctx
        .query
        .get("$expand")
        .is_some_and(|e| e.eq_ignore_ascii_case("ReplicationStatus"));
    move |_, r| body::render(r.kind, &r.body, replication)
}

async fn list_galleries(
    AxState(em): AxState<Emulator>,
    Path((sub, rg)): Path<(String, String)>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = key(&format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}",
        Kind::Gallery.type_name()
    ));
    list_response(&em, &ctx, &Collection::Group(collection), render(&ctx))
}

async fn list_all_galleries(
    AxState(em): AxState<Emulator>,
    Path(sub): Path<String>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let collection = Collection::Subscription {
        sub,
        type_name: Kind::Gallery.type_name().to_owned(),
    };
    list_response(&em, &ctx, &collection, render(&ctx))
}

/// Lists the children of `parent`, 404 `ParentResourceNotFound` when it does not exist.
fn list_children(em: &Emulator, ctx: &Ctx, parent: &Address) -> Result<Response, ArmError> {
    let exists = em.read(|core| {
        core.state
            .get(&parent.id)
            .is_some_and(|r| r.kind == parent.kind)
    });
    if !exists {
        return Err(parent_not_found(&parent.name));
    }
    let collection = parent.children().unwrap_or_default();
    list_response(em, ctx, &Collection::Group(key(&collection)), render(ctx))
}

async fn list_images(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery)): GalleryPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    list_children(&em, &ctx, &Address::gallery(&sub, &rg, &gallery))
}

async fn list_versions(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image)): ImagePath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    list_children(&em, &ctx, &Address::image(&sub, &rg, &gallery, &image))
}

fn parent_not_found(name: &str) -> ArmError {
    ArmError::rejected(
        404,
        "ParentResourceNotFound",
        format!(
            "Can not perform requested operation on nested resource. Parent resource '{name}' not found."
        ),
    )
}

fn read(em: &Emulator, ctx: &Ctx, address: &Address) -> Result<Response, ArmError> {
    let render = render(ctx);
    let found = em.read(|core| {
        if let Some((parent, parent_name)) = &address.parent
            && core.state.get(parent).is_none()
        {
            return Err(parent_not_found(parent_name));
        }
        core.state
            .get(&address.id)
            .filter(|r| r.kind == address.kind)
            .map(|r| (render(&core.state, r), r.etag().to_owned()))
            .ok_or_else(|| ArmError::ResourceNotFound(address.id.clone()))
    });
    let (body, etag) = found?;
    Ok(json_response(StatusCode::OK, body, Some(&etag)))
}

async fn read_gallery(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery)): GalleryPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    read(&em, &ctx, &Address::gallery(&sub, &rg, &gallery))
}

async fn read_image(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image)): ImagePath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    read(&em, &ctx, &Address::image(&sub, &rg, &gallery, &image))
}

async fn read_version(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image, version)): VersionPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    read(
        &em,
        &ctx,
        &Address::version(&sub, &rg, &gallery, &image, &version),
    )
}

async fn put_gallery(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery)): GalleryPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write(
        &em,
        &ctx,
        &Address::gallery(&sub, &rg, &gallery),
        &raw,
        false,
    )
}

async fn patch_gallery(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery)): GalleryPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write(
        &em,
        &ctx,
        &Address::gallery(&sub, &rg, &gallery),
        &raw,
        true,
    )
}

async fn put_image(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image)): ImagePath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write(
        &em,
        &ctx,
        &Address::image(&sub, &rg, &gallery, &image),
        &raw,
        false,
    )
}

async fn patch_image(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image)): ImagePath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    write(
        &em,
        &ctx,
        &Address::image(&sub, &rg, &gallery, &image),
        &raw,
        true,
    )
}

async fn put_version(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image, version)): VersionPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    body::check_version_name(&version)?;
    let address = Address::version(&sub, &rg, &gallery, &image, &version);
    write(&em, &ctx, &address, &raw, false)
}

async fn patch_version(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image, version)): VersionPath,
    ctx: Ctx,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let address = Address::version(&sub, &rg, &gallery, &image, &version);
    write(&em, &ctx, &address, &raw, true)
}

/// A PUT (`patch` false) or PATCH of a gallery resource: validated, stored `Creating` or
/// `Updating`, and an operation started that ends it `Succeeded`.
fn write(
    em: &Emulator,
    ctx: &Ctx,
    address: &Address,
    raw: &[u8],
    patch: bool,
) -> Result<Response, ArmError> {
    let mut request = parse_object(raw)?;
    body::drop_server_fields(&mut request);
    let kind = address.kind;
    let (status, rendered, op) = em.write(|core, now| {
        if let Some((parent, parent_name)) = &address.parent
            && core.state.get(parent).is_none()
        {
            return Err(parent_not_found(parent_name));
        }
        let existing = core
            .state
            .get(&address.id)
            .filter(|r| r.kind == kind)
            .cloned();
        ctx.check_conditions(existing.as_ref())?;
        let (mut resource, action, step) = match existing {
            None if patch => return Err(ArmError::ResourceNotFound(address.id.clone())),
            None => {
                let location = required_location(&request)?;
                body::check_create(kind, &request)?;
                let mut created = request.clone();
                stamp_envelope(&mut created, kind, &address.id, &address.name, &location);
                body::stamp_created(kind, &mut created, &address.sub, &address.name, now);
                let step = if kind == Kind::GalleryImageVersion {
                    Step::VmCreate
                } else {
                    Step::DiskCreate
                };
                (Resource::new(kind, created), Action::Create, step)
            }
            Some(old) => {
                old.ensure_idle()?;
                let mut updated = written_body(&old.body, &request, patch);
                for field in ["id", "name", "type", "location"] {
                    updated[field] = old.body[field].clone();
                }
                body::check_update(kind, &old.body, &updated)?;
                keep_server_fields(kind, &old.body, &mut updated);
                let mut resource = old.clone();
                resource.body = updated;
                (resource, Action::Update, Step::DiskUpdate)
            }
        };
        resource.set_provisioning_state(if action == Action::Create {
            "Creating"
        } else {
            "Updating"
        });
        let rendered = body::render(kind, &resource.body, false);
        let location = resource.location().to_owned();
        core.state.resources.insert(key(&address.id), resource);
        let spec = ctx.op_spec(
            &address.sub,
            kind,
            action,
            address.id.clone(),
            location,
            vec![step],
        );
        let op = core.begin(spec, now);
        let status = if action == Action::Create {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((status, rendered, op))
    })?;
    Ok(accepted(
        status,
        Some(rendered),
        &op.links(&ctx.base),
        false,
    ))
}

/// An update keeps what the server wrote at the create (the gallery's unique name, a version's
/// published date) and fills a version's defaults again.
fn keep_server_fields(kind: Kind, old: &Value, new: &mut Value) {
    let old_props = &old["properties"];
    match kind {
        Kind::Gallery => {
            if let Some(unique) = old_props["identifier"].get("uniqueName") {
                let p = props(new);
                let identifier = p
                    .entry("identifier")
                    .or_insert_with(|| serde_json::json!({}));
                identifier["uniqueName"] = unique.clone();
            }
        }
        Kind::GalleryImageVersion => {
            if let Some(published) = old_props["publishingProfile"].get("publishedDate") {
                let p = props(new);
                let profile = p
                    .entry("publishingProfile")
                    .or_insert_with(|| serde_json::json!({}));
                profile["publishedDate"] = published.clone();
            }
            if new["properties"].get("storageProfile").is_none() {
                props(new).insert("storageProfile".into(), old_props["storageProfile"].clone());
            }
            let location = old["location"].as_str().unwrap_or_default().to_owned();
            body::fill_version_defaults(new, &location);
        }
        _ => {}
    }
}

async fn delete_gallery(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery)): GalleryPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    delete(&em, &ctx, &Address::gallery(&sub, &rg, &gallery))
}

async fn delete_image(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image)): ImagePath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    delete(&em, &ctx, &Address::image(&sub, &rg, &gallery, &image))
}

async fn delete_version(
    AxState(em): AxState<Emulator>,
    Path((sub, rg, gallery, image, version)): VersionPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    delete(
        &em,
        &ctx,
        &Address::version(&sub, &rg, &gallery, &image, &version),
    )
}

/// The id of a child of the resource keyed `parent_key`, if it has one.
fn first_child(state: &State, parent_key: &str) -> Option<String> {
    let prefix = format!("{parent_key}/");
    state
        .resources
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(_, r)| r.id().to_owned())
        .next()
}

/// A DELETE: 204 when absent; 409 `CannotDeleteResource` while children exist; else 202 and an
/// operation that removes it.
fn delete(em: &Emulator, ctx: &Ctx, address: &Address) -> Result<Response, ArmError> {
    let op = em.write(|core, now| {
        let existing = core.state.get(&address.id).filter(|r| r.kind == address.kind).cloned();
        ctx.check_conditions(existing.as_ref())?;
        let Some(resource) = existing else {
            return Ok(None);
        };
        if let Some(child) = first_child(&core.state, &key(&address.id)) {
            let nested = child
                .split_once("/providers/")
                .map_or(child.as_str(), |(_, rest)| rest)
                .to_owned();
            return Err(ArmError::rejected(
                409,
                "CannotDeleteResource",
                format!(
                    "Cannot delete resource while nested resources exist. Some existing nested resource IDs include: '{nested}'. Please delete all nested resources before deleting this resource."
                ),
            ));
        }
        if let Some(busy) = resource
            .busy
            .as_ref()
            .and_then(|b| core.state.operations.get(b))
        {
            return match busy.action {
                Action::Delete => Ok(Some(busy.clone())),
                _ => Err(ArmError::Busy(resource.id().to_owned())),
            };
        }
        if let Some(r) = core.state.get_mut(&address.id) {
            r.set_provisioning_state("Deleting");
        }
        let spec = ctx.op_spec(
            &address.sub,
            address.kind,
            Action::Delete,
            resource.id().to_owned(),
            resource.location().to_owned(),
            vec![Step::DiskDelete],
        );
        Ok(Some(core.begin(spec, now)))
    })?;
    Ok(match op {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(op) => accepted(StatusCode::ACCEPTED, None, &op.links(&ctx.base), true),
    })
}
