//go:build tools

// Package tools keeps `go mod tidy` from pruning what the provider's main
// package (copied from the pinned module at build time) and its generator need.
package tools

import (
	_ "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	_ "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
	_ "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)
