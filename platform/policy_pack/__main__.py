"""`pulumi preview --policy-pack platform/policy_pack`: guardrails on what the program actually registers."""

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from trainyard.k8s import CRD_UNPROTECTED_LABEL
from trainyard.platform.policy_pack.checks import CRD_TYPE, tenant_coverage_violations, wildcard_violations


def _no_wildcards(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for message in wildcard_violations(args.resource_type, args.props):
        report(message, None)


def _crds_protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == CRD_TYPE and not args.opts.protect and args.props.get("metadata", {}).get(
            "labels", {}).get(CRD_UNPROTECTED_LABEL) != "true":
        report("CRDs must be protected: deleting one deletes every object of its kind (set policies.protectCrds)", None)


def _tenant_coverage(args: StackValidationArgs, report: ReportViolation) -> None:
    for message in tenant_coverage_violations((r.resource_type, r.props) for r in args.resources):
        report(message, None)


PolicyPack(
    name="trainyard-platform",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(name="no-wildcard-rbac", description="Roles list resources and verbs explicitly.",
                                 validate=_no_wildcards),
        ResourceValidationPolicy(name="crds-protected", description="CRDs are protected from deletion.",
                                 validate=_crds_protected, enforcement_level=EnforcementLevel.ADVISORY),
        StackValidationPolicy(name="tenant-coverage",
                              description="Every tenant namespace has a quota, a queue, RBAC and a queue guard.",
                              validate=_tenant_coverage),
    ],
)
