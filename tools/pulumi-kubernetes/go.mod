module trainyard.dev/tools/pulumi-kubernetes

go 1.26.0

require (
	github.com/pulumi/pulumi-kubernetes/provider/v4 v4.0.0-20260608201737-a03ff6ba58d2
	github.com/pulumi/pulumi-kubernetes/sdk/v4 v4.32.0
)
