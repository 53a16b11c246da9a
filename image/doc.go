// Package image makes OCI images the sandbox's read-only root: a safe
// extractor for layers (hostile input), a content-addressed store of
// unpacked trees, and pulling and importing through go-containerregistry.
package image
