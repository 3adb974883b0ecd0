module trainyard.dev/tools/pulumi

go 1.25.11

require (
	github.com/pulumi/pulumi/pkg/v3 v3.259.0
	github.com/pulumi/pulumi/sdk/v3 v3.259.0
)

replace (
	github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
	golang.org/x/text => golang.org/x/text v0.39.0
)
