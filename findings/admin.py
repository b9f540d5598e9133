from django import forms
from django.contrib import admin, messages

from findings.models import Finding, StateRefused


class FindingStateForm(forms.ModelForm):
    """The admin's one editable field, `state`, judged by the rules the API and the staff page
    obey (Finding.refusal): a fixed finding is not set back to new, and `new` is the
    evaluator's word alone, so it is offered only while the finding still has it."""

    class Meta:
        model = Finding
        fields = ["state"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "state" in self.fields:
            offered = [s for s in Finding.State if s in Finding.MARKS or s == self.instance.state]
            self.fields["state"].choices = [(s.value, s.label) for s in offered]

    def clean_state(self) -> str:
        state = self.cleaned_data["state"]
        if state != self.instance.state:
            refused = self.instance.refusal(state)
            if refused:
                raise forms.ValidationError(refused)
        return state


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    """Read-mostly: findings come from the rules. A person's mark (here or on the staff page)
    goes through Finding.mark, so who and when are kept and a refused one is said."""

    form = FindingStateForm
    list_display = ["subject", "rule", "waste_money_week", "waste_kwh_week", "state", "closed_at"]
    list_filter = ["rule", "state", "site"]
    readonly_fields = [f.name for f in Finding._meta.fields if f.name not in ("state",)]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a record of who marked what

    def save_model(self, request, obj: Finding, form, change: bool) -> None:
        # Not obj.save(): that kept the old state_by/state_at beside the new state. The form
        # has judged the mark; mark() judges it again under the row lock (someone may have
        # marked it fixed on the staff page since the form was drawn).
        if "state" not in form.changed_data:
            return
        try:
            obj.mark(form.cleaned_data["state"], request.user)
        except StateRefused as exc:
            obj.refresh_from_db()
            self.message_user(request, f"Not marked: {exc}", level=messages.ERROR)
