module trainyard.dev/tools/cni-plugins

go 1.26.8

require github.com/containernetworking/plugins v1.9.1 // indirect
