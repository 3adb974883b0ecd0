"""Where a gang's pods may go (pure): the node constraints of its pod templates, as kube-scheduler and Volcano's
predicates read them.

Reclaim frees nodes for a starving gang by evicting other tenants' jobs; a node the gang cannot use (its
`nodeSelector` or required node affinity does not match, or a taint it does not tolerate) must not count, or the
victims' work is lost for nothing. Preferred affinity and `PreferNoSchedule` taints constrain nothing. The
platform's own hold taint (`trainyard.dev/reserved-for`) is left out: the loop that sets it also gives the gang
its toleration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from trainyard import k8s as K

HARD_EFFECTS = ("NoSchedule", "NoExecute")


def _expression_matches(expression: Mapping, value: str | None) -> bool:
    operator, values = expression.get("operator"), [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            mine, bound = int(value), int(values[0])
        except ValueError:
            return False
        return mine > bound if operator == "Gt" else mine < bound
    return False


def term_matches(term: Mapping, name: str, labels: Mapping[str, str]) -> bool:
    """A nodeSelectorTerm: every matchExpression on labels and every matchField (metadata.name) holds; an empty
    term matches nothing, as in the API."""
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return (all(_expression_matches(e, labels.get(str(e.get("key")))) for e in expressions)
            and all(_expression_matches(f, name if f.get("key") == "metadata.name" else None) for f in fields))


def tolerates(tolerations: Iterable[Mapping], taint: Mapping) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        if operator == "Exists" and (not key or key == taint.get("key")):
            return True
        if operator == "Equal" and key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


@dataclass(frozen=True)
class Placement:
    """The node constraints every GPU pod of a gang carries (each template's, all of them together)."""

    selectors: tuple[tuple[tuple[str, str], ...], ...] = ()
    """Each template's nodeSelector, as sorted (key, value) pairs."""
    required_terms: tuple[tuple[dict, ...], ...] = ()
    """Each template's required nodeAffinity terms (any one of a template's terms must match)."""
    tolerations: tuple[tuple[dict, ...], ...] = ()
    """Each template's tolerations."""

    def allows(self, name: str, labels: Mapping[str, str], taints: Iterable[Mapping]) -> bool:
        hard = [t for t in taints if t.get("effect") in HARD_EFFECTS and t.get("key") != K.RESERVATION_TAINT]
        return (all(labels.get(key) == value for selector in self.selectors for key, value in selector)
                and all(any(term_matches(term, name, labels) for term in terms) for terms in self.required_terms)
                and all(tolerates(tolerations, taint) for tolerations in self.tolerations for taint in hard))


ANYWHERE = Placement()


def placement_of(pod_specs: Iterable[Mapping]) -> Placement:
    """The constraints of these pod templates' specs together (a node must suit every one)."""
    selectors, terms, tolerations = [], [], []
    for spec in pod_specs:
        selectors.append(tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())))
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        if required.get("nodeSelectorTerms") is not None:
            terms.append(tuple(required.get("nodeSelectorTerms") or []))
        tolerations.append(tuple(spec.get("tolerations") or []))
    return Placement(tuple(selectors), tuple(terms), tuple(tolerations))


def gang_placement(jobset: Mapping) -> Placement:
    """The placement of a JobSet's GPU pods (those of replicated jobs whose containers or native sidecars ask for
    GPUs); anywhere when none does."""
    specs = []
    for replicated in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        spec = ((((replicated.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
        if K.pod_spec_holds_gpus(spec):
            specs.append(spec)
    return placement_of(specs) if specs else ANYWHERE
