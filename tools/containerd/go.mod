module trainyard.dev/tools/containerd

go 1.26.8

require github.com/containerd/containerd/v2 v2.4.2 // indirect
