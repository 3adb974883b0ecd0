//go:build tools

// Package tools keeps `go mod tidy` from pruning what trainer-controller-manager
// (built from the pinned module by `trainyard tools build kubeflow-trainer`) needs.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
