//! Label selectors: the full string syntax (`k=v,k!=v,k in (a,b),k notin (a),k,!k`) and
//! `metav1.LabelSelector` (matchLabels + matchExpressions), with one matching rule for both.
