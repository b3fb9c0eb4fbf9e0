// Package template makes templates: images a tenant (or the operator)
// brings, from an OCI image, a Dockerfile or a session, and resolves
// "template": NAME on one-shot runs and sessions to them.
//
// It owns:
//
//   - the template lifecycle: a request is recorded building, a Builder
//     fills a fresh rootfs in the background, Finish (package image) adds
//     our agent and hardening and scans it for credentials, and the
//     template is published and marked ready, or marked failed with the
//     reason and the failing line (Service);
//   - the build log, append-only and kept, readable while it grows (log.go);
//   - uploaded contexts: tars for archive imports and Dockerfile builds,
//     size-limited and owned by one tenant (contexts.go);
//   - the per-tenant storage quota of templates and deletion that refuses
//     while a session runs from a template;
//   - resolving a template name for a tenant (its own, then the
//     operator's) into an airlock.Image, and the image name
//     "template:<template_id>" back to it (Images) for the paths that
//     resolve a recorded session's image again (restart, fork);
//   - templates from a session (session.go): the session's image's rootfs
//     hard-linked, its workspace (copied when asked) as the template's
//     /workspace, and the memory snapshot the session manager took when
//     asked, deleted with the template;
//   - garbage collection (gc.go, gc_cache.go): template directories
//     without a record, snapshots of deleted templates, unlisted layers,
//     and the Dockerfile step cache and FROM images no template lists
//     and no build in progress claims (a Pin, pin.go);
//   - the OCI import Builder (oci.go, unpack.go): registry pulls with
//     go-containerregistry, uploaded OCI layouts and docker save
//     archives, a layer cache by digest, and the safe unpacker;
//   - templates in a fleet's object store (objects.go): each template
//     published is uploaded as one archive, its digest recorded; a node
//     that does not hold a template pulls it once (single flight), checks
//     the digest and unpacks it with the safe unpacker.
//
// On-disk layout, under <state>/templates:
//
//	<template_id>/rootfs         the published rootfs (read-only to sandboxes)
//	<template_id>/template.json  what Finish did (agent, size, secret scan)
//	logs/<template_id>.log       the build log
//	contexts/<context_id>.tar    uploaded contexts, and .json beside each
//	layers/sha256/<hex>          the layer cache, one file per digest
//	.tmp/                        builds in progress; cleared at start
//
// Another builder (a Dockerfile builder) plugs in as a Builder for its
// source kind (Config.Builders): it gets the request, a log writer and an
// empty rootfs directory to fill; everything else is done here.
//
// It must not run sandboxes itself (a Builder that needs one gets it from
// elsewhere), and never stores a registry credential.
package template
